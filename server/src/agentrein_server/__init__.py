"""AgentRein server: the REST API, the reviewer dashboard and the background workers."""
