"""Stateful fakes of the services agents call, each serving on 127.0.0.1 from a thread of its own."""
