"""Alembic's migrations of AgentRein's schema (``versions/``), applied by :meth:`Store.upgrade
<agentrein_core.store.Store.upgrade>`."""

#: The newest revision in ``versions/`` (a test holds it to Alembic's own head). A database already there is
#: only looked at when a store opens: no migrator runs, and Alembic is not even imported.
HEAD = "0018"
