"""Use cases of who may do what: organisations and their plans and settings, API keys, dashboard users and
their sign-ins, and the connector settings server-side rollbacks run with."""

from __future__ import annotations

import secrets

from attrs import evolve

import agentrein_core.engine.validation as validation
from agentrein_core import notifications, targets
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.records import replace
from agentrein_core.errors import NotFoundError, UnauthorizedError, ValidationError
from agentrein_core.ids import new_id
from agentrein_core.model import (
    DEFAULT_ORGANISATION,
    JSON,
    ApiKey,
    ConnectorConfig,
    Organisation,
    OrganisationSettings,
    User,
)
from agentrein_core.statuses import DriftResponse, Plan, Role, UserRole

#: API keys: a recognisable prefix, then 256 random bits; only their sha256 is stored.
API_KEY_PREFIX = "ar_"


class Accounts(UseCases):
    # organisations ------------------------------------------------------------------------------------
    def ensure_organisation(self, name: str = DEFAULT_ORGANISATION, plan: Plan = Plan.TEAM) -> Organisation:
        """The organisation called ``name``, created with ``plan`` if it does not exist yet."""
        with self.store.transaction() as tx:
            existing = tx.organisations.by_name(name)
            if existing is not None:
                return existing
            org = Organisation(new_id("org"), validation.text("name", name, 200), Plan(plan), self.clock())
            tx.insert(org)
            return org

    def create_organisation(self, name: str, plan: Plan | str = Plan.TEAM) -> Organisation:
        """A new organisation; its name must be new."""
        plan = validation.enum("plan", Plan, plan)
        with self.store.transaction() as tx:
            if tx.organisations.by_name(name) is not None:
                raise ValidationError("name", f"an organisation named {name!r} already exists")
            org = Organisation(new_id("org"), validation.text("name", name, 200), plan, self.clock())
            tx.insert(org)
            return org

    def list_organisations(self) -> list[Organisation]:
        with self.store.transaction(write=False) as tx:
            return tx.organisations.all()

    def organisation_named(self, name: str) -> Organisation:
        with self.store.transaction(write=False) as tx:
            org = tx.organisations.by_name(name)
            if org is None:
                raise NotFoundError("organisation", name, key="name")
            return org

    def settings(self, org_id: str) -> OrganisationSettings:
        with self.store.transaction(write=False) as tx:
            if tx.organisations.get(org_id) is None:
                raise NotFoundError("organisation", org_id)
            return tx.settings.get(org_id) or OrganisationSettings(org_id)

    def update_settings(self, org_id: str, **changes: object) -> OrganisationSettings:
        """Change some of the organisation's settings (``on_drift``, ``verifier_url``, ``verifier_model``,
        ``verifier_api_key`` (an encrypted token), ``webhook_hosts``); the others stay as they are."""
        checked: dict[str, object] = {}
        for name, value in changes.items():
            if name == "on_drift":
                checked[name] = validation.enum("onDrift", DriftResponse, value)
            elif name == "verifier_url":
                checked[name] = _verifier_url(value) if value is not None else None
            elif name == "verifier_model":
                checked[name] = validation.text("verifierModel", value, 200) if value is not None else None
            elif name == "verifier_api_key":
                checked[name] = validation.text("verifierApiKey", value, 10_000) if value is not None else None
            elif name == "webhook_hosts":
                checked[name] = notifications.check_host_patterns(value)
            else:
                raise ValidationError(name, "is not a setting")
        with self.store.transaction() as tx:
            if tx.organisations.get(org_id) is None:
                raise NotFoundError("organisation", org_id)
            updated = evolve(tx.settings.get(org_id) or OrganisationSettings(org_id), **checked)  # type: ignore[arg-type]
            tx.upsert(updated)
            return updated

    # api keys -----------------------------------------------------------------------------------------
    def create_api_key(self, org_id: str, role: Role | str) -> tuple[ApiKey, str]:
        """A new key of ``role`` for the organisation: the record, and the secret, which is never stored and
        so can be shown only now."""
        role = validation.enum("role", Role, role)
        secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(new_id("key"), org_id, role, validation.hash_key(secret), secret[:10], self.clock())
        with self.store.transaction() as tx:
            if tx.organisations.get(org_id) is None:
                raise NotFoundError("organisation", org_id)
            tx.insert(key)
        return key, secret

    def authenticate(self, secret: str) -> ApiKey:
        """The key whose secret this is; :class:`UnauthorizedError` for an unknown or revoked one."""
        if not secret.startswith(API_KEY_PREFIX):
            raise UnauthorizedError("the API key is not an AgentRein key (they start with 'ar_')")
        with self.store.transaction(write=False) as tx:
            key = tx.api_keys.by_hash(validation.hash_key(secret))
        if key is None or key.revoked_at is not None:
            raise UnauthorizedError("the API key is unknown or revoked")
        return key

    def active_key(self, org_id: str, key_id: str) -> ApiKey:
        """The organisation's key of this id (one a signed token names); :class:`UnauthorizedError` once revoked."""
        with self.store.transaction(write=False) as tx:
            key = tx.api_keys.get(org_id, key_id)
        if key is None or key.revoked_at is not None:
            raise UnauthorizedError("the API key this token was issued for is unknown or revoked")
        return key

    def revoke_api_key(self, org_id: str, key_id: str) -> ApiKey:
        """The key stops working (at once on this server; within ``KEY_CACHE_SECONDS`` on other replicas)."""
        with self.store.transaction() as tx:
            key = tx.api_keys.get(org_id, key_id)
            if key is None:
                raise NotFoundError("API key", key_id)
            if key.revoked_at is not None:
                return key
            revoked = evolve(key, revoked_at=self.clock())
            replace(tx, revoked, revoked_at=None)
            return revoked

    def list_api_keys(self, org_id: str) -> list[ApiKey]:
        with self.store.transaction(write=False) as tx:
            return tx.api_keys.of_org(org_id)

    # dashboard users ----------------------------------------------------------------------------------
    def create_user(self, org_id: str, email: str, role: UserRole | str, password: str) -> User:
        """A dashboard user of the organisation; only an argon2 hash of ``password`` is kept."""
        user = User(
            user_id=new_id("usr"),
            org_id=org_id,
            email=validation.email(email),
            role=validation.enum("role", UserRole, role),
            password_hash=validation.hash_password(validation.password(password)),
            created_at=self.clock(),
        )
        with self.store.transaction() as tx:
            if tx.organisations.get(org_id) is None:
                raise NotFoundError("organisation", org_id)
            if not tx.insert_once(user):
                # Emails are unique across organisations; say no more than that it cannot be used.
                raise ValidationError("email", f"{user.email!r} cannot be used: it is taken")
        return user

    def sign_in(self, email: str, password: str) -> User:
        """The user with this email and password; :class:`UnauthorizedError` otherwise, saying not which of
        the two was wrong (and taking as long for an unknown email, so emails cannot be probed)."""
        with self.store.transaction(write=False) as tx:
            user = tx.users.by_email(email.strip().lower()) if isinstance(email, str) else None
        matches = validation.password_matches(user.password_hash if user else None, password)  # always checked
        if user is None or not matches:
            raise UnauthorizedError("the email or the password is wrong")
        return user

    def get_user(self, org_id: str, user_id: str) -> User:
        with self.store.transaction(write=False) as tx:
            user = tx.users.get(org_id, user_id)
        if user is None:
            raise NotFoundError("user", user_id)
        return user

    def end_sign_ins(self, org_id: str, user_id: str) -> User:
        """Sign the user out everywhere: every dashboard sign-in made before now stops working."""
        with self.store.transaction() as tx:
            user = tx.users.get(org_id, user_id)
            if user is None:
                raise NotFoundError("user", user_id)
            ended = evolve(user, sign_in_epoch=user.sign_in_epoch + 1)
            tx.replace(ended)
            return ended

    def list_users(self, org_id: str) -> list[User]:
        with self.store.transaction(write=False) as tx:
            return tx.users.of_org(org_id)

    def delete_user(self, org_id: str, user_id: str) -> None:
        """Remove a user (their past decisions keep their name). The organisation's last admin stays, so
        someone can always manage it."""
        with self.store.transaction() as tx:
            tx.organisations.lock(org_id)  # two admins removing each other at once must not both succeed
            user = tx.users.get(org_id, user_id)
            if user is None:
                raise NotFoundError("user", user_id)
            admins = [u for u in tx.users.of_org(org_id) if u.role is UserRole.ADMIN]
            if admins == [user]:
                raise ValidationError("user", f"{user.email} is the organisation's last admin; make another first")
            tx.users.delete(org_id, user_id)

    # connector settings -------------------------------------------------------------------------------
    def configure_connector(
        self, org_id: str, connector: str, *, enabled: bool, config: JSON, credentials: str | None
    ) -> ConnectorConfig:
        """Store the organisation's settings for ``connector``; ``credentials`` is an encrypted token (the
        caller encrypts), kept as it is when ``None`` is given and settings existed."""
        validation.json_value("config", config)
        with self.store.transaction() as tx:
            existing = tx.connector_configs.get(org_id, connector)
            if credentials is None and existing is not None:
                credentials = existing.credentials
            stored = ConnectorConfig(
                org_id=org_id,
                connector=validation.text("connector", connector, 100),
                enabled=validation.boolean("enabled", enabled),
                config=config,
                updated_at=self.clock(),
                credentials=credentials,
            )
            tx.upsert(stored)
            return stored

    def connector_config(self, org_id: str, connector: str) -> ConnectorConfig | None:
        with self.store.transaction(write=False) as tx:
            return tx.connector_configs.get(org_id, connector)

    def list_connector_configs(self, org_id: str) -> list[ConnectorConfig]:
        with self.store.transaction(write=False) as tx:
            return tx.connector_configs.of_org(org_id)


def _verifier_url(value: object) -> str:
    """An organisation's own verifier: an http(s) URL of a public host, refused when stored (and checked again
    before each request, as a host's address may change), as webhook URLs are."""
    url = validation.url("verifierUrl", value)
    targets.check_target_url("verifierUrl", url)
    return url
