"""The pytest plugin of agentrein-testing (registered through the ``pytest11`` entry point)."""
