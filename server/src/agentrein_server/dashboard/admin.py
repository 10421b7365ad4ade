"""The admin pages: policies (with a preview of what a rule would have matched), connectors (credentials
write-only), API keys (a new secret shown once), users, settings (drift, verifier, webhook hosts) and
webhooks (with their delivery logs). Every handler here needs an admin: a reviewer
gets 403. Forms post, then redirect back with a message (so a reload never posts twice)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from agentrein_core.converter import json_object
from agentrein_core.errors import AgentReinError
from agentrein_core.policies import describe
from agentrein_core.statuses import DriftResponse, EventType, PolicyEffect, Role, UserRole, WebhookFormat
from agentrein_server.dashboard import forms
from agentrein_server.dashboard.rendering import fragment, page, redirect
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
        return page(
            request,
            "policies.html",
            viewer,
            policies=services.engine.list_policies(viewer.org_id),
            effects=list(PolicyEffect),
            describe=describe,
        )

    @post(sync_to_thread=True, status_code=303)
    def create(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.NewPolicy, URL_ENCODED],
    ) -> Redirect:
        try:
            policy = services.engine.add_policy(
                viewer.org_id,
                data.name.strip(),
                data.effect,
                connector=forms.optional(data.connector),
                api_name=forms.optional(data.api_name),
                agent_id=forms.optional(data.agent_id),
                operation_type=forms.optional(data.operation_type),
                before_execution=bool(data.before_execution),
                approval_timeout_ms=forms.minutes_in_ms("timeout_minutes", data.timeout_minutes),
            )
        except AgentReinError as err:
            return redirect(request, "/dashboard/policies", f"Policy not added: {err}", error=True)
        return redirect(request, "/dashboard/policies", f"Policy {policy.name!r} added.")

    @post("/preview", sync_to_thread=True, status_code=200)
    def preview(
        self, viewer: ViewerDep, services: ServicesDep, data: Annotated[forms.NewPolicy, URL_ENCODED]
    ) -> Template:
        """Which recent actions the rule being typed would have matched."""
        try:
            matched = services.engine.preview_policy(
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
        policy = services.engine.set_policy_enabled(viewer.org_id, policy_id, data.enabled == "true")
        return redirect(
            request, "/dashboard/policies", f"Policy {policy.name!r} {'enabled' if policy.enabled else 'disabled'}."
        )

    @post("/{policy_id:str}/delete", sync_to_thread=True, status_code=303)
    def delete(
        self, policy_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        services.engine.delete_policy(viewer.org_id, policy_id)
        return redirect(request, "/dashboard/policies", "Policy deleted.")


class ConnectorPages(AdminPages):
    path = "/connectors"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        stored = {c.connector: c for c in services.engine.list_connector_configs(viewer.org_id)}
        installed = [(name, stored.get(name)) for name in services.connectors.names()]
        return page(request, "connectors.html", viewer, installed=installed)

    @post("/{name:str}", sync_to_thread=True, status_code=303)
    def enable(
        self,
        name: FromPath[str],
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.ConnectorSettings, URL_ENCODED],
    ) -> Redirect:
        """Enable with these settings; empty credentials keep the stored ones."""
        try:
            services.configure_connector(
                viewer.org_id,
                name,
                enabled=True,
                config=json_object("config", data.config) or {},
                credentials=json_object("credentials", data.credentials),
            )
        except AgentReinError as err:
            return redirect(request, "/dashboard/connectors", f"{name} not enabled: {err}", error=True)
        return redirect(request, "/dashboard/connectors", f"{name} enabled.")

    @post("/{name:str}/disable", sync_to_thread=True, status_code=303)
    def disable(
        self, name: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        stored = services.engine.connector_config(viewer.org_id, name)
        services.configure_connector(
            viewer.org_id, name, enabled=False, config=stored.config if stored else {}, credentials=None
        )
        return redirect(request, "/dashboard/connectors", f"{name} disabled.")


class KeyPages(AdminPages):
    path = "/keys"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        """The keys; right after one was made, its secret, this once."""
        new_key = request.session.pop("new_key", None)
        keys = services.engine.list_api_keys(viewer.org_id)
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
            key, secret = services.engine.create_api_key(viewer.org_id, data.role)
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
        users = services.engine.list_users(viewer.org_id)
        return page(request, "users.html", viewer, users=users, roles=list(UserRole))

    @post(sync_to_thread=True, status_code=303)
    def create(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.NewUser, URL_ENCODED],
    ) -> Redirect:
        try:
            user = services.engine.create_user(viewer.org_id, data.email, data.role, data.password)
        except AgentReinError as err:
            return redirect(request, "/dashboard/users", f"User not added: {err}", error=True)
        return redirect(request, "/dashboard/users", f"{user.email} can now sign in as {user.role}.")

    @post("/{user_id:str}/delete", sync_to_thread=True, status_code=303)
    def delete(
        self, user_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        try:
            services.engine.delete_user(viewer.org_id, user_id)
        except AgentReinError as err:
            return redirect(request, "/dashboard/users", f"User not removed: {err}", error=True)
        return redirect(request, "/dashboard/users", "User removed.")


class SettingsPages(AdminPages):
    path = "/settings"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        settings = services.engine.settings(viewer.org_id)
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
            services.update_settings(viewer.org_id, **changes)
        except AgentReinError as err:
            return redirect(request, "/dashboard/settings", f"Settings not saved: {err}", error=True)
        return redirect(request, "/dashboard/settings", "Settings saved.")


class WebhookPages(AdminPages):
    path = "/webhooks"

    @get(sync_to_thread=True)
    def index(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Template:
        """The webhooks; right after one was made, its signing secret, this once."""
        new_secret = request.session.pop("new_webhook_secret", None)
        hooks = services.engine.list_webhooks(viewer.org_id)
        hosts = services.engine.settings(viewer.org_id).webhook_hosts
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
            _, secret = services.add_webhook(
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
        log = services.engine.list_deliveries(viewer.org_id, webhook_id)
        (hook,) = [h for h in services.engine.list_webhooks(viewer.org_id) if h.webhook_id == webhook_id]
        return page(request, "webhook.html", viewer, hook=hook, deliveries=log)

    @post("/{webhook_id:str}/delete", sync_to_thread=True, status_code=303)
    def delete(
        self, webhook_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        services.engine.delete_webhook(viewer.org_id, webhook_id)
        return redirect(request, "/dashboard/webhooks", "Webhook removed.")
