"""AgentRein server and the ``agentrein`` command line."""
