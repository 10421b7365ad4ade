"""The admin pages: policies (with a preview of what a rule would have matched), connectors (a form from
each connector's declared settings; credentials write-only), API keys (a new secret shown once), users,
settings (drift, verifier, webhook hosts) and webhooks (with their delivery logs). Every handler here needs an
admin: a reviewer gets 403. Forms post, then redirect back with a message (so a reload never posts twice); a
refused policy, connector or user form comes back with the reason and what was typed, passwords and secrets
aside."""

from __future__ import annotations

from typing import Annotated, Any

from attrs import frozen
from litestar import Controller, Request, get, post
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from agentrein_core.commands import NewPolicy
from agentrein_core.errors import AgentReinError, ValidationError
from agentrein_core.model import JSON, ConnectorConfig
from agentrein_core.policies import describe
from agentrein_core.statuses import DriftResponse, EventType, PolicyEffect, Role, UserRole, WebhookFormat
from agentrein_server.dashboard import forms
from agentrein_server.dashboard.connector_form import FormField, Posted, form_fields, settings_from_form
from agentrein_server.dashboard.rendering import fragment, page, redirect, refused
from agentrein_server.dashboard.viewer import ViewerDep, admins_only, provide_admin
from agentrein_server.services import ServicesDep

URL_ENCODED = Body(media_type=RequestEncodingType.URL_ENCODED)
#: How many of the latest actions a policy preview looks through.
PREVIEW_ACTIONS = 200


class AdminPages(Controller):
    """Base of the admin pages: only admins get through (the guard), and ``viewer`` is one."""

    guards = [admins_only]  # noqa: RUF012 - Litestar's layout
    dependencies = {"viewer": Provide(provide_admin, sync_to_thread=False)}  # noqa: RUF012


class PolicyPages(AdminPages):
    path = "/policies"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        return page(request, "policies.html", viewer, **_policies(services, viewer.org_id, forms.NewPolicy()))

    @post(sync_to_thread=True, status_code=303)
    def create(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.NewPolicy, URL_ENCODED],
    ) -> Redirect | Template:
        try:
            new = NewPolicy(
                data.name.strip(),
                data.effect,
                connector=forms.optional(data.connector),
                api_name=forms.optional(data.api_name),
                agent_id=forms.optional(data.agent_id),
                operation_type=forms.optional(data.operation_type),
                before_execution=bool(data.before_execution),
                approval_timeout_ms=forms.minutes_in_ms("timeout_minutes", data.timeout_minutes),
            )
            policy = services.engine.policies.add_policy(viewer.org_id, new)
        except AgentReinError as err:
            context = _policies(services, viewer.org_id, data)
            return refused("policies.html", viewer, err, f"Policy not added: {err}", **context)
        return redirect(request, "/dashboard/policies", f"Policy {policy.name!r} added.")

    @post("/preview", sync_to_thread=True, status_code=200)
    def preview(
        self, viewer: ViewerDep, services: ServicesDep, data: Annotated[forms.NewPolicy, URL_ENCODED]
    ) -> Template:
        """Which recent actions the rule being typed would have matched."""
        try:
            matched = services.engine.policies.preview_policy(
                viewer.org_id,
                connector=forms.optional(data.connector),
                api_name=forms.optional(data.api_name),
                agent_id=forms.optional(data.agent_id),
                operation_type=forms.optional(data.operation_type),
                recent=PREVIEW_ACTIONS,
            )
        except AgentReinError as err:
            return fragment("policy_preview.html", matched=[], error=str(err), looked_at=PREVIEW_ACTIONS)
        return fragment("policy_preview.html", matched=matched, error=None, looked_at=PREVIEW_ACTIONS)

    @post("/{policy_id:str}/enabled", sync_to_thread=True, status_code=303)
    def set_enabled(
        self,
        policy_id: FromPath[str],
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.PolicyState, URL_ENCODED],
    ) -> Redirect:
        policy = services.engine.policies.set_policy_enabled(viewer.org_id, policy_id, data.enabled == "true")
        return redirect(
            request, "/dashboard/policies", f"Policy {policy.name!r} {'enabled' if policy.enabled else 'disabled'}."
        )

    @post("/{policy_id:str}/delete", sync_to_thread=True, status_code=303)
    def delete(
        self, policy_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        services.engine.policies.delete_policy(viewer.org_id, policy_id)
        return redirect(request, "/dashboard/policies", "Policy deleted.")


class ConnectorPages(AdminPages):
    path = "/connectors"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        return page(request, "connectors.html", viewer, connectors=_connector_cards(services, viewer.org_id))

    @post("/{name:str}", sync_to_thread=True, status_code=303)
    def enable(
        self,
        name: FromPath[str],
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[dict[str, str | list[str]], URL_ENCODED],
    ) -> Redirect | Template:
        """Enable with the settings typed in the connector's form; an empty secret keeps the stored one."""
        connector = services.connectors.get(name)
        stored = services.engine.accounts.connector_config(viewer.org_id, name)
        try:
            config, credentials = settings_from_form(connector, data, _readable(services, stored))
            services.configuration.configure_connector(
                viewer.org_id, name, enabled=True, config=config, credentials=credentials
            )
        except AgentReinError as err:
            cards = _connector_cards(services, viewer.org_id, typed=(name, data, err))
            return refused("connectors.html", viewer, err, f"{name} not enabled: {err}", connectors=cards)
        return redirect(request, "/dashboard/connectors", f"{name} enabled.")

    @post("/{name:str}/disable", sync_to_thread=True, status_code=303)
    def disable(
        self, name: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        stored = services.engine.accounts.connector_config(viewer.org_id, name)
        services.configuration.configure_connector(
            viewer.org_id, name, enabled=False, config=stored.config if stored else {}, credentials=None
        )
        return redirect(request, "/dashboard/connectors", f"{name} disabled.")


class KeyPages(AdminPages):
    path = "/keys"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        """The keys; right after one was made, its secret, this once."""
        new_key = request.session.pop("new_key", None)
        keys = services.engine.accounts.list_api_keys(viewer.org_id)
        return page(request, "keys.html", viewer, keys=keys, roles=list(Role), new_key=new_key)

    @post(sync_to_thread=True, status_code=303)
    def create(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.NewApiKey, URL_ENCODED],
    ) -> Redirect:
        """Make a key; its secret rides in the (encrypted) session cookie to the next page view, which shows it
        once, so that reloading that page creates no second key."""
        try:
            key, secret = services.engine.accounts.create_api_key(viewer.org_id, data.role)
        except AgentReinError as err:
            return redirect(request, "/dashboard/keys", f"Key not created: {err}", error=True)
        request.session["new_key"] = {"role": key.role.value, "secret": secret}
        return redirect(request, "/dashboard/keys")

    @post("/{key_id:str}/revoke", sync_to_thread=True, status_code=303)
    def revoke(
        self, key_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        key = services.revoke_api_key(viewer.org_id, key_id)
        return redirect(request, "/dashboard/keys", f"Key {key.prefix}… revoked.")


class UserPages(AdminPages):
    path = "/users"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        return page(request, "users.html", viewer, **_users(services, viewer.org_id, forms.NewUser()))

    @post(sync_to_thread=True, status_code=303)
    def create(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.NewUser, URL_ENCODED],
    ) -> Redirect | Template:
        try:
            user = services.engine.accounts.create_user(viewer.org_id, data.email, data.role, data.password)
        except AgentReinError as err:
            context = _users(services, viewer.org_id, data)
            return refused("users.html", viewer, err, f"User not added: {err}", **context)
        return redirect(request, "/dashboard/users", f"{user.email} can now sign in as {user.role}.")

    @post("/{user_id:str}/delete", sync_to_thread=True, status_code=303)
    def delete(
        self, user_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        try:
            services.engine.accounts.delete_user(viewer.org_id, user_id)
        except AgentReinError as err:
            return redirect(request, "/dashboard/users", f"User not removed: {err}", error=True)
        return redirect(request, "/dashboard/users", "User removed.")


class SettingsPages(AdminPages):
    path = "/settings"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        settings = services.engine.accounts.settings(viewer.org_id)
        return page(request, "settings.html", viewer, settings=settings, responses=list(DriftResponse))

    @post(sync_to_thread=True, status_code=303)
    def change(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.Settings, URL_ENCODED],
    ) -> Redirect:
        changes: dict[str, object] = {
            "on_drift": data.on_drift,
            "verifier_url": forms.optional(data.verifier_url),
            "verifier_model": forms.optional(data.verifier_model),
            "webhook_hosts": [line.strip() for line in data.webhook_hosts.splitlines() if line.strip()],
        }
        if data.forget_verifier_api_key:
            changes["verifier_api_key"] = None
        elif data.verifier_api_key.strip():
            changes["verifier_api_key"] = data.verifier_api_key.strip()
        try:
            services.configuration.update_settings(viewer.org_id, **changes)
        except AgentReinError as err:
            return redirect(request, "/dashboard/settings", f"Settings not saved: {err}", error=True)
        return redirect(request, "/dashboard/settings", "Settings saved.")


class WebhookPages(AdminPages):
    path = "/webhooks"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        """The webhooks; right after one was made, its signing secret, this once."""
        new_secret = request.session.pop("new_webhook_secret", None)
        hooks = services.engine.outbox.list_webhooks(viewer.org_id)
        hosts = services.engine.accounts.settings(viewer.org_id).webhook_hosts
        return page(
            request,
            "webhooks.html",
            viewer,
            hooks=hooks,
            hosts=hosts,
            events=list(EventType),
            formats=list(WebhookFormat),
            new_secret=new_secret,
        )

    @post(sync_to_thread=True, status_code=303)
    def create(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.NewWebhook, URL_ENCODED],
    ) -> Redirect:
        try:
            _, secret = services.configuration.add_webhook(
                viewer.org_id, data.url, forms.several(data.events), forms.optional(data.secret), data.format
            )
        except AgentReinError as err:
            return redirect(request, "/dashboard/webhooks", f"Webhook not added: {err}", error=True)
        request.session["new_webhook_secret"] = secret
        return redirect(request, "/dashboard/webhooks", "Webhook added.")

    @get("/{webhook_id:str}", sync_to_thread=True)
    def deliveries(
        self, webhook_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Template:
        """The webhook's delivery log, newest first."""
        log = services.engine.outbox.list_deliveries(viewer.org_id, webhook_id)
        (hook,) = [h for h in services.engine.outbox.list_webhooks(viewer.org_id) if h.webhook_id == webhook_id]
        return page(request, "webhook.html", viewer, hook=hook, deliveries=log)

    @post("/{webhook_id:str}/delete", sync_to_thread=True, status_code=303)
    def delete(
        self, webhook_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        services.engine.outbox.delete_webhook(viewer.org_id, webhook_id)
        return redirect(request, "/dashboard/webhooks", "Webhook removed.")


def _policies(services: ServicesDep, org_id: str, form: forms.NewPolicy) -> dict[str, Any]:
    """The Policies page, its form filled with ``form``."""
    policies = services.engine.policies.list_policies(org_id)
    return {"policies": policies, "effects": list(PolicyEffect), "describe": describe, "form": form}


def _users(services: ServicesDep, org_id: str, form: forms.NewUser) -> dict[str, Any]:
    """The Users page, its form filled with ``form`` (its password never)."""
    return {"users": services.engine.accounts.list_users(org_id), "roles": list(UserRole), "form": form}


def _readable(services: ServicesDep, stored: ConnectorConfig | None) -> JSON:
    """The stored credentials, decrypted; none when this server's secret key cannot read them (they are then
    typed again, which the page says when a rollback would need them)."""
    try:
        return services.vault.decrypt(stored.credentials if stored else None)
    except AgentReinError:
        return {}


@frozen
class ConnectorCard:
    """One installed connector on the Connectors page: its stored settings, whether the server can run its
    undos at all, whether it hands some to the agent's process (those on a service its settings do not name:
    each MCP server is one), and its form."""

    name: str
    stored: ConnectorConfig | None
    undoes_in_server: bool
    hands_some_over: bool
    declared: bool
    fields: list[FormField]


def _connector_cards(
    services: ServicesDep, org_id: str, typed: tuple[str, Posted, AgentReinError] | None = None
) -> list[ConnectorCard]:
    """Every installed connector's card; ``typed``: a refused submit (connector, form, error), whose form
    keeps what was typed."""
    stored = {c.connector: c for c in services.engine.accounts.list_connector_configs(org_id)}
    cards = []
    for name in services.connectors.names():
        connector, settings = services.connectors.get(name), stored.get(name)
        secrets = frozenset(_readable(services, settings))
        form, refusal = None, None
        if typed is not None and typed[0] == name:
            form, err = typed[1], typed[2]
            refusal = err if isinstance(err, ValidationError) else None
        fields = form_fields(connector, settings, secrets, form, refusal)
        in_server = connector.undoes_in_server()
        hands_some_over = in_server and connector.may_hand_over()
        cards.append(ConnectorCard(name, settings, in_server, hands_some_over, bool(connector.settings), fields))
    return cards
