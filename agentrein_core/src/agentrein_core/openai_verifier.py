"""The built-in intent verifier: asks any OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI,
vLLM, Ollama, llama.cpp's server) for a structured verdict.

It is a plugin like any other (entry point ``openai-verifier`` of ``agentrein-core``) and answers only when a
URL is configured (``AGENTREIN_VERIFIER_URL`` / ``_MODEL`` / ``_API_KEY``, or the organisation's settings).
The request asks for a JSON-schema answer (``response_format``) and carries only redacted payloads.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from agentrein_core.connector import hookimpl
from agentrein_core.errors import ValidationError
from agentrein_core.intent import IntentCheck, Verdict, VerifierError
from agentrein_core.statuses import VerificationOutcome
from agentrein_core.targets import pinned_client

NAME = "openai-compatible"
#: The answer the model must give: a JSON object of exactly these two fields.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "outcome": {"type": "string", "enum": [VerificationOutcome.VERIFIED, VerificationOutcome.DRIFT_DETECTED]},
        "rationale": {"type": "string", "description": "One or two sentences a reviewer can act on."},
    },
    "required": ["outcome", "rationale"],
    "additionalProperties": False,
}
SYSTEM_PROMPT = (
    "You check what an AI agent did against the intent it declared for its session. Judge only from the "
    "calls shown. Answer VERIFIED when the calls plainly serve the intent, DRIFT_DETECTED when any of them "
    "does something the intent does not call for (another customer, another repository, a larger amount, a "
    "deletion nobody asked for). Values shown as [REDACTED] were hidden on purpose; do not count them against "
    "the agent. Give a short rationale a human reviewer can act on."
)
MAX_RATIONALE = 1000


def chat_completions_url(base: str) -> str:
    """``https://host/v1`` -> ``https://host/v1/chat/completions``, keeping a query (Azure's
    ``?api-version=``); a full endpoint is used as it is."""
    path, _, query = base.partition("?")
    path = path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    return f"{path}?{query}" if query else path


def request_body(check: IntentCheck) -> dict[str, Any]:
    subject = "this action" if check.subject == "action" else "the session's actions, taken together"
    calls = [
        {
            "seq": a.seq,
            "connector": a.connector,
            "call": a.api_name,
            "operationType": a.operation_type,
            "payload": a.payload,
            "response": a.response,
        }
        for a in check.actions
    ]
    question = {"agent": check.agent_id, "declaredIntent": check.intent, "judge": subject, "calls": calls}
    body: dict[str, Any] = {"model": check.settings.model} if check.settings.model else {}
    return body | {
        "temperature": 0,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(question, ensure_ascii=False, default=str)},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "intent_verification", "strict": True, "schema": ANSWER_SCHEMA},
        },
    }


def _content_text(content: Any) -> str:
    """A message's text: a string, or a list of parts (``[{"type": "text", "text": …}]``), without a Markdown
    code fence some models put around JSON."""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise VerifierError("the verifier gave no answer (a refusal, or an empty message)")
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def read_verdict(answer: Any, model: str | None) -> Verdict:
    """The verdict in a chat-completions answer; :class:`VerifierError` for anything else."""
    try:
        verdict = json.loads(_content_text(answer["choices"][0]["message"].get("content")))
        outcome = VerificationOutcome(verdict["outcome"])
        rationale = verdict["rationale"]
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise VerifierError(f"the verifier's answer is not a verdict ({type(exc).__name__}: {exc})") from None
    if outcome is VerificationOutcome.UNVERIFIED or not isinstance(rationale, str) or not rationale.strip():
        raise VerifierError("the verifier's answer is not a verdict (outcome or rationale missing)")
    return Verdict(outcome, rationale.strip()[:MAX_RATIONALE], f"{NAME}:{model}" if model else NAME)


@hookimpl
def agentrein_verify_intent(check: IntentCheck) -> Verdict | None:
    settings = check.settings
    if not settings.url:
        return None  # not configured: another verifier may answer, or the check is UNVERIFIED
    headers: dict[str, str] = {}
    if settings.api_key:  # Azure OpenAI's endpoints take the key as api-key, the others as a bearer token
        azure = ".openai.azure.com" in settings.url.lower()
        headers = {"api-key": settings.api_key} if azure else {"Authorization": f"Bearer {settings.api_key}"}
    # The server's own verifier may be on its network (and behind its proxy); an organisation's may not.
    client = httpx.Client() if settings.trusted else pinned_client("verifierUrl")
    try:
        with client:
            response = client.post(
                chat_completions_url(settings.url), json=request_body(check), headers=headers, timeout=settings.timeout
            )
    except ValidationError as exc:
        raise VerifierError(f"the verifier URL is refused: {exc}") from None
    except httpx.TimeoutException:
        raise VerifierError(f"the verifier did not answer within {settings.timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise VerifierError(f"the verifier could not be reached ({type(exc).__name__}: {exc})") from None
    if response.status_code != 200:  # its words are not kept: they could be anything the URL answers
        raise VerifierError(f"the verifier answered {response.status_code}")
    try:
        answer = response.json()
    except ValueError:
        raise VerifierError("the verifier's answer is not JSON") from None
    return read_verdict(answer, settings.model)
