"""The demo: an agent on a loopback fake service, failing on its fourth step and rolled back."""
