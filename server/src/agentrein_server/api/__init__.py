"""The REST API (DESIGN.md §5), one module per resource. Bodies are msgspec structs (camelCase, unknown
fields refused); responses are records turned into camelCase JSON by ``agentrein_core.converter.wire``."""
