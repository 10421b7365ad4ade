"""The ``agentrein`` command line: :data:`agentrein_cli.main.app`."""
