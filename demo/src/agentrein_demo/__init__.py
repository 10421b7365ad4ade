"""``agentrein demo``: an onboarding agent on loopback fakes of Stripe and GitHub, failing on its last step
and rolled back (:mod:`agentrein_demo.run`; the command, :mod:`agentrein_demo.command`)."""
