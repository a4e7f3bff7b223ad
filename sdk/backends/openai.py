"""An OpenAI-compatible chat server (vLLM, SGLang, llama.cpp, ...) as an agent backend.

The same `Agent`, tools and typed outputs run against a server speaking the OpenAI chat API:
`Agent(model=OpenAIChatModel("http://127.0.0.1:8000/v1", "my-model"))`. Only "produce the
turn" changes: instead of masking logits locally, the turn's constraint is sent to the server
in the form it understands, chosen by `constraint`:

- `"gbnf"`: the agent's exact turn grammar (free text + Hermes `<tool_call>` blocks, or the
  typed output) exported to GBNF (`sdk.engine.gbnf`), in the `grammar` field (llama.cpp;
  `grammar_field="ebnf"` for SGLang, `"structured_outputs.grammar"` for vLLM's xgrammar).
  Tools are described in the system prompt and calls come back as text, parsed exactly like
  local generation.
- `"lark"`: the same turn grammar as Lark text in llguidance's dialect (`&`/`~` for our
  lookaheads, free text before a call as a lazy lexeme: `sdk.engine.lark_guidance`), in
  `structured_outputs.grammar` (vLLM's `guidance` backend) by default
  (`grammar_field="guided_grammar"` for older vLLM).
- `"structural_tag"`: `response_format={"type": "structural_tag", ...}` (vLLM, SGLang with
  XGrammar): free text until the call opener, then each call's arguments under its tool's JSON
  Schema (`structural_tag_for`). Looser than the turn grammar (the text around calls is free,
  a typed final answer is left to the agent's validation); tools in the system prompt, calls
  parsed from the text as in the grammar modes.
- `"json_schema"`: native `tools` / `tool_choice`; a typed final reply as
  `response_format={"type": "json_schema", ...}` (OpenAI, vLLM, SGLang, llama-server).
- `"json_object"`: the same, with llama-cpp-python's `{"type": "json_object", "schema": ...}`.
- `"none"`: native `tools` / `tool_choice` only; nothing else is enforced server-side.

Whatever the server enforces, the reply goes through the agent's own parse → validate → retry
path: arguments are validated by the tools' Pydantic models, unknown tools are refused before
anything runs, invalid arguments go back to the model as feedback, `finish_reason="length"`
inside a call or typed output raises `TruncationError`.

Transport: `httpx` (sync and async clients), a `timeout` per request, and `max_retries`
retries with exponential backoff (tenacity) on connection errors, timeouts, 429 and 5xx.
When they run out, `RemoteTimeoutError` / `RemoteModelError` (with the status and body).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from sdk.backends._sent_schema import sent_schema
from sdk.backends._structural_tag import (
    declare_open_objects,
    legacy_structural_tag,
    looser_schema,
    structural_tag_for,
)
from sdk.decoding.formats import ParsedCall, openai_message
from sdk.decoding.generate import SamplingConfig, TurnOutput, TurnRequest
from sdk.errors import RemoteModelError, RemoteTimeoutError, SDKError, UnexpectedModelBehavior
from sdk.result import Usage

if TYPE_CHECKING:
    import httpx

    from sdk.decoding.turn_grammar import TurnGrammar
    from sdk.engine.gbnf import GbnfExport

__all__ = [
    "Constraint",
    "OpenAIChatModel",
    "RemoteModelError",
    "RemoteTimeoutError",
    "declare_open_objects",
    "legacy_structural_tag",
    "looser_schema",
    "sent_schema",
    "structural_tag_for",
]

_log = logging.getLogger("sdk.backends")

# What a refused grammar usually means, per constraint (`python -m sdk.bench servers` measures
# which engine takes which text).
_GRAMMAR_HINTS = {
    "lark": (
        " (if the grammar was refused: constraint='lark' is llguidance's Lark, for vLLM's "
        "guidance or auto backend; vLLM's xgrammar backend converts Lark its own way and "
        "refuses it: send constraint='gbnf' there)"
    ),
    "gbnf": (
        " (if the grammar was refused: constraint='gbnf' suits llama.cpp, SGLang's `ebnf` "
        "and vLLM's xgrammar backend; vLLM's guidance backend takes constraint='lark')"
    ),
}


def _loose_gbnf(lark: str) -> GbnfExport:
    """The GBNF sent for a turn grammar: exact where GBNF can be, explicitly looser where not."""
    from sdk.engine.gbnf import export_gbnf

    export = export_gbnf(lark, loosen=True)
    for what in export.loosened:
        _log.warning(
            "the server's GBNF grammar is looser than the turn grammar: %s is dropped; the "
            "agent's own validation checks the reply (usage.loosened_turns counts such turns)",
            what,
        )
    return export


Constraint = Literal["gbnf", "lark", "structural_tag", "json_schema", "json_object", "none"]
_CONSTRAINTS: tuple[str, ...] = get_args(Constraint)
_GRAMMAR_MODES = ("gbnf", "lark")
# Modes whose tools are described in the prompt and whose calls come back as text.
_TEXT_MODES = (*_GRAMMAR_MODES, "structural_tag")
# A typed output goes as a schema in `response_format`.
_SCHEMA_MODES = ("json_schema", "json_object", "structural_tag")
_VLLM_FIELDS = ("structured_outputs.grammar", "guided_grammar")  # either dialect goes there
_DEFAULT_FIELD = {"gbnf": "grammar", "lark": "structured_outputs.grammar"}
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class _RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        super().__init__(f"HTTP {response.status_code}")


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    base_url: the API root, e.g. "http://127.0.0.1:8000/v1" (`/chat/completions` is appended).
    model: the served model name; None asks the server (`GET /models`, first entry) once.
    api_key: sent as `Authorization: Bearer ...` when given.
    constraint: how turns are constrained on the server (see the module docstring).
    grammar_field: where the grammar goes for "gbnf"/"lark": a request field, dotted for
        nesting ("grammar", "ebnf", "structured_outputs.grammar", "guided_grammar").
    tag_shape: the structural tag's shape for "structural_tag": "format" (XGrammar's
        `format` tree: vLLM, recent SGLang) or "legacy" (`structures` and `triggers`, the
        only shape older SGLang takes: one JSON call per trigger, so the text around calls,
        at least one call and one call at most are left to the agent; a format whose calls
        are not one JSON object each gets a `ConfigError`).
    schema_engine: the engine that compiles a typed output's JSON Schema on the server, where
        its reading differs from the standard's in a way no rewrite keeps exact: "xgrammar"
        (vLLM's and SGLang's default) takes no escape sequence in a string with `minLength`,
        `maxLength` or `pattern`, so such strings are sent without those keywords where they
        could hold a character JSON escapes (looser: logged, counted in
        `usage.loosened_turns`, the reply validated as always). None: sent as the standard
        reads it (`sent_schema`).
    timeout: seconds per HTTP request (connect, read, write, pool).
    max_retries: retries of one request on connection errors, timeouts, 429 and 5xx.
    backoff: first retry delay in seconds (doubles each retry, capped at 8 s).
    extra_body: extra top-level request fields (e.g. `{"top_k": 20}`), merged into every request.
    headers: extra HTTP headers.
    transport / async_transport: `httpx` transports (tests pass `httpx.MockTransport`).
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        constraint: Constraint = "json_schema",
        grammar_field: str | None = None,
        tag_shape: Literal["format", "legacy"] = "format",
        schema_engine: Literal["xgrammar"] | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if constraint not in _CONSTRAINTS:
            raise ValueError(f"constraint={constraint!r}: expected one of {list(_CONSTRAINTS)}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if tag_shape not in ("format", "legacy"):
            raise ValueError(f"tag_shape={tag_shape!r}: expected 'format' or 'legacy'")
        self.tag_shape = tag_shape
        if schema_engine not in (None, "xgrammar"):
            raise ValueError(f"schema_engine={schema_engine!r}: expected 'xgrammar' or None")
        self.schema_engine = schema_engine
        self._schemas: OrderedDict[str, tuple[dict[str, Any], list[str]]] = OrderedDict()
        # A typed output's `response_format` the server refused, and the looser one it took:
        # later turns send that one first (one refusal, one warning, per schema).
        self._taken: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.base_url = base_url.rstrip("/")
        self.model_name = model
        self.api_key = api_key
        self.constraint: Constraint = constraint
        self.grammar_field = grammar_field or _DEFAULT_FIELD.get(constraint, "grammar")
        # The grammar dialect sent ("gbnf" or "lark"): `constraint`'s, until a vLLM server
        # refuses it and takes the other (`_other_dialect`).
        self._dialect: str = constraint
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.extra_body = dict(extra_body or {})
        self.headers = dict(headers or {})
        self._transport = transport
        self._async_transport = async_transport
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._exports: OrderedDict[tuple[str, str], str] = OrderedDict()

    @classmethod
    def from_env(cls, **kwargs: Any) -> OpenAIChatModel:
        """From `SDK_MODEL_URL` (required), `SDK_MODEL_NAME`, `SDK_MODEL_CONSTRAINT`,
        `SDK_GRAMMAR_FIELD` and `SDK_API_KEY`; keyword arguments win."""
        url = os.environ.get("SDK_MODEL_URL")
        if not url:
            raise ValueError("SDK_MODEL_URL is not set")
        env = {
            "model": os.environ.get("SDK_MODEL_NAME") or None,
            "constraint": os.environ.get("SDK_MODEL_CONSTRAINT") or "json_schema",
            "grammar_field": os.environ.get("SDK_GRAMMAR_FIELD") or None,
            "api_key": os.environ.get("SDK_API_KEY") or None,
        }
        return cls(url, **{**env, **kwargs})

    def __repr__(self) -> str:
        return (
            f"OpenAIChatModel({self.base_url!r}, {self.model_name!r}, "
            f"constraint={self.constraint!r})"
        )

    # ------------------------------------------------------------------ HTTP

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", **self.headers}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def _sync_client(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    timeout=self.timeout, headers=self._headers(), transport=self._transport
                )
            return self._client

    def close(self) -> None:
        """Close the pooled sync client (the async path opens one client per request)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retrying(self) -> Any:
        from tenacity import Retrying

        return self._retry_policy(Retrying)

    def _async_retrying(self) -> Any:
        from tenacity import AsyncRetrying

        return self._retry_policy(AsyncRetrying)

    def _retry_policy(self, kind: Any) -> Any:
        """Transport failures and retryable statuses, with exponential backoff (tenacity)."""
        import httpx
        from tenacity import retry_if_exception_type, stop_after_attempt, wait_exponential

        return kind(
            retry=retry_if_exception_type((httpx.TransportError, _RetryableStatus)),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential(multiplier=self.backoff, max=8),
            reraise=True,
        )

    def _checked(self, response: httpx.Response) -> Any:
        if response.status_code in _RETRY_STATUS:
            raise _RetryableStatus(response)
        if response.status_code >= 400:
            hint = _GRAMMAR_HINTS.get(self.constraint, "") if response.status_code == 400 else ""
            raise RemoteModelError(
                f"server answered HTTP {response.status_code}: {response.text[:500]}{hint}",
                status_code=response.status_code,
                body=response.text,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise RemoteModelError(
                f"server reply is not JSON: {response.text[:200]!r}",
                status_code=response.status_code,
                body=response.text,
            ) from exc

    def _failure(self, exc: BaseException, url: str) -> RemoteModelError:
        import httpx

        tries = self.max_retries + 1
        if isinstance(exc, httpx.TimeoutException):
            return RemoteTimeoutError(
                f"{url}: no answer within timeout={self.timeout}s ({tries} attempts)"
            )
        if isinstance(exc, _RetryableStatus):
            r = exc.response
            return RemoteModelError(
                f"{url}: HTTP {r.status_code} after {tries} attempts: {r.text[:500]}",
                status_code=r.status_code,
                body=r.text,
            )
        return RemoteModelError(f"{url}: {type(exc).__name__}: {exc} ({tries} attempts)")

    def _http(self, path: str, body: Mapping[str, Any] | None) -> Any:
        """GET `path` (body None) or POST `body` to it, with retries; the reply's JSON."""
        import httpx

        url = self.base_url + path
        client = self._sync_client()
        try:
            for attempt in self._retrying():
                with attempt:
                    if body is None:
                        r = client.get(url)
                    else:
                        r = client.post(url, content=json.dumps(body, ensure_ascii=False))
                    return self._checked(r)
        except (httpx.TransportError, _RetryableStatus) as exc:
            raise self._failure(exc, url) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ahttp(self, path: str, body: Mapping[str, Any] | None) -> Any:
        import httpx

        url = self.base_url + path
        async with httpx.AsyncClient(
            timeout=self.timeout, headers=self._headers(), transport=self._async_transport
        ) as client:
            try:
                async for attempt in self._async_retrying():
                    with attempt:
                        if body is None:
                            r = await client.get(url)
                        else:
                            content = json.dumps(body, ensure_ascii=False)
                            r = await client.post(url, content=content)
                        return self._checked(r)
            except (httpx.TransportError, _RetryableStatus) as exc:
                raise self._failure(exc, url) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _model_from(self, listing: Any) -> str:
        try:
            name = str(listing["data"][0]["id"])
        except (KeyError, IndexError, TypeError) as exc:
            raise RemoteModelError(f"GET {self.base_url}/models lists no model") from exc
        self.model_name = name
        return name

    def resolve_model(self) -> str:
        """The served model's name (asks `GET /models` once when `model` was not given)."""
        if self.model_name is not None:
            return self.model_name
        return self._model_from(self._http("/models", None))

    async def aresolve_model(self) -> str:
        if self.model_name is not None:
            return self.model_name
        return self._model_from(await self._ahttp("/models", None))

    # ------------------------------------------------------------------ requests

    def gbnf_for(self, grammar: TurnGrammar) -> str:
        """The turn grammar as GBNF (cached per grammar text): the same language, except
        where GBNF cannot hold a construct (a lookahead whose automaton is too big to write
        out): that one is dropped, logged, and counted in `usage.loosened_turns`."""
        return self._gbnf_export(grammar).text

    def _grammar_text(self, grammar: TurnGrammar, dialect: str) -> str:
        return self.gbnf_for(grammar) if dialect == "gbnf" else self.lark_for(grammar)

    def _other_dialect(
        self, exc: RemoteModelError, body: dict[str, Any], grammar: TurnGrammar
    ) -> dict[str, Any] | None:
        """The request again in the other grammar dialect, where a vLLM server refused this
        one (HTTP 400): its xgrammar backend reads Lark its own way and refuses ours, its
        guidance backend does not read our GBNF; both read the other exactly. Logged, and
        kept for later turns. None where that does not apply."""
        if (
            exc.status_code != 400
            or self.constraint not in _GRAMMAR_MODES
            or self._dialect != self.constraint
            or self.grammar_field not in _VLLM_FIELDS
            or _get(body, self.grammar_field) is None
        ):
            return None
        other = "gbnf" if self._dialect == "lark" else "lark"
        try:
            text = self._grammar_text(grammar, other)
        except SDKError:
            return None
        _log.warning(
            "the server refused the %s grammar (%s); sending %s grammars from now on (vLLM "
            "reads constraint='lark' with its guidance backend, 'gbnf' with its xgrammar one)",
            self._dialect,
            str(exc)[:200],
            other,
        )
        self._dialect = other
        retry = json.loads(json.dumps(body))
        _put(retry, self.grammar_field, text)
        return retry

    def _fallbacks(
        self, exc: RemoteModelError, body: dict[str, Any], grammar: TurnGrammar
    ) -> list[tuple[dict[str, Any], bool]]:
        """The requests to try after `exc`, in order, each with whether it is looser: the
        other grammar dialect, or looser forms of a typed output's schema. `exc` itself is
        raised where none applies."""
        retry = self._other_dialect(exc, body, grammar)
        if retry is not None:
            return [(retry, False)]
        looser = self._looser_schemas(exc, body)
        if looser:
            return [(r, True) for r in looser]
        raise exc

    def _looser_schemas(self, exc: RemoteModelError, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Where the server refused a typed output's schema (HTTP 400): the request with the
        schema without the assertions servers often refuse (`looser_schema`), then, should
        that be refused too, with JSON alone (`{"type": "json_object"}`: XGrammar refuses
        some valid schemas outright, llguidance circular references with siblings). Each is
        logged when sent and counted in `usage.loosened_turns`; the reply is validated
        against the real schema as always."""
        fmt = body.get("response_format")
        if exc.status_code != 400 or not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            return []
        schema = (fmt.get("json_schema") or {}).get("schema")
        out = []
        looser = looser_schema(schema)
        if looser != schema:
            retry = json.loads(json.dumps(body))
            retry["response_format"]["json_schema"]["schema"] = looser
            out.append(retry)
        bare = json.loads(json.dumps(body))
        bare["response_format"] = {"type": "json_object"}
        out.append(bare)
        return out

    def _announce(self, exc: RemoteModelError, body: dict[str, Any], loose: bool) -> None:
        if loose:
            bare = body["response_format"]["type"] == "json_object"
            _log.warning(
                "the server refused the output's JSON Schema (%s); sending %s: the agent "
                "validates the reply against the full schema",
                str(exc)[:200],
                "JSON alone (json_object)"
                if bare
                else "it without the assertions servers often refuse (not, oneOf as anyOf, "
                "uniqueItems, ...)",
            )

    def _gave_up(self, exc: RemoteModelError, again: RemoteModelError, loose: bool) -> bool:
        """After a fallback was refused too: stop (the first error stands) or try the next?"""
        if loose and again.status_code == 400:
            return False
        self._dialect = self.constraint
        return True

    def _schema_format(self, schema: Mapping[str, Any], taken: bool = True) -> dict[str, Any]:
        """A typed output's `response_format`: the schema the agent enforces, written as
        servers' engines read it (`sent_schema`), as `json_schema`, or in llama-cpp-python's
        `json_object` (whose converter refuses a pattern it cannot anchor and then takes any
        JSON, silently). `taken`: the looser one a server took instead, where one did."""
        sent = self._sent(schema)[0]
        if self.constraint == "json_object":
            fmt: dict[str, Any] = {"type": "json_object", "schema": sent}
        else:
            fmt = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": sent},
            }
        if taken:
            with self._lock:
                hit = self._taken.get(_key(fmt))
            if hit is not None:
                return json.loads(json.dumps(hit))
        return fmt

    def _remember(self, body: dict[str, Any], retry: dict[str, Any]) -> None:
        """The server took `retry`'s looser `response_format` after refusing `body`'s."""
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and retry.get("response_format") != fmt:
            with self._lock:
                self._taken[_key(fmt)] = retry["response_format"]
                while len(self._taken) > 64:
                    self._taken.popitem(last=False)

    def _sent(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The typed output's schema as sent, and what `schema_engine` made looser in it
        (logged once per schema)."""
        key = json.dumps(schema, sort_keys=True, default=str)
        with self._lock:
            hit = self._schemas.get(key)
        if hit is None:
            dropped: list[str] = []
            hit = (sent_schema(dict(schema), self.schema_engine, dropped), dropped)
            if dropped:
                _log.warning(
                    "the typed output's schema is sent looser for %s, which takes no escape "
                    "sequence in a bounded or patterned string: %s dropped; the agent "
                    "validates the reply against the full schema",
                    self.schema_engine,
                    "; ".join(dropped)[:300],
                )
            with self._lock:
                self._schemas[key] = hit
                while len(self._schemas) > 64:
                    self._schemas.popitem(last=False)
        return hit

    def _gbnf_export(self, grammar: TurnGrammar) -> GbnfExport:
        return cast("GbnfExport", self._exported(grammar, "gbnf", _loose_gbnf))

    def lark_for(self, grammar: TurnGrammar) -> str:
        """The turn grammar in llguidance's Lark (vLLM's `guidance` backend reads Lark):
        lookaheads as `&`/`~`, free text before a call as a lazy lexeme
        (`sdk.engine.lark_guidance`); the same language."""
        from sdk.engine.lark_guidance import lark_for_guidance

        return self._exported(grammar, "lark", lark_for_guidance)

    def _exported(self, grammar: TurnGrammar, kind: str, export: Any) -> str:
        assert grammar.lark is not None
        key = (kind, grammar.lark)
        with self._lock:
            hit = self._exports.get(key)
        if hit is None:
            hit = export(grammar.lark)
            with self._lock:
                self._exports[key] = hit
                while len(self._exports) > 64:
                    self._exports.popitem(last=False)
        return hit

    def build_request(
        self,
        request: TurnRequest,
        grammar: TurnGrammar,
        *,
        max_tokens: int,
        sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 - frozen dataclass
        parallel_tool_calls: bool = True,
        model: str | None = None,
    ) -> dict[str, Any]:
        """The JSON body of the `/chat/completions` request for one turn."""
        body: dict[str, Any] = {}
        name = model or self.model_name
        if name is not None:
            body["model"] = name
        grammar_mode = self.constraint in _GRAMMAR_MODES
        text_mode = self.constraint in _TEXT_MODES
        body["messages"] = _hermes_messages(request) if text_mode else _native_messages(request)
        body["max_tokens"] = max_tokens
        body["temperature"] = sampling.temperature
        if sampling.top_p < 1.0:
            body["top_p"] = sampling.top_p
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if grammar_mode:
            # A "none" turn's answer rule stays local: the agent checks the text it gets back
            # (a server's grammar sampler would pay per token for free text).
            if grammar.lark is not None and grammar.mode != "none":
                _put(body, self.grammar_field, self._grammar_text(grammar, self._dialect))
        elif self.constraint == "structural_tag":
            tag = structural_tag_for(request, grammar, parallel_tool_calls)
            if tag is not None and self.tag_shape == "legacy":
                tag = legacy_structural_tag(tag, request.fmt)
            if tag is not None:
                body["response_format"] = tag
            elif grammar.mode == "output" and request.output_schema is not None:
                body["response_format"] = self._schema_format(request.output_schema)
        else:
            if request.tools:
                body["tools"] = [t.to_openai() for t in request.tools]
                body["tool_choice"] = _native_tool_choice(request)
                if not parallel_tool_calls:
                    body["parallel_tool_calls"] = False
            schema = request.output_schema
            if grammar.mode == "output" and schema is not None and self.constraint != "none":
                body["response_format"] = self._schema_format(schema)
        for k, v in self.extra_body.items():
            body[k] = v
        return body

    def parse_response(
        self,
        data: Any,
        request: TurnRequest,
        grammar: TurnGrammar,
        *,
        parallel_tool_calls: bool = True,
        elapsed: float = 0.0,
    ) -> TurnOutput:
        """A `/chat/completions` reply as a `TurnOutput` (native tool calls in `calls`)."""
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError) as exc:
            raise RemoteModelError(
                f"unexpected reply shape: {json.dumps(data)[:300]}", body=json.dumps(data)
            ) from exc
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        finish = str(choice.get("finish_reason") or "stop")
        calls: list[ParsedCall] | None = None
        if self.constraint not in _TEXT_MODES:
            raw_calls = message.get("tool_calls") or []
            if raw_calls:
                calls = [_parsed_call(c) for c in raw_calls]
            elif grammar.tool_names and request.fmt.opener in text:
                calls = request.fmt.parse(text)  # a server without a tool parser
            else:
                calls = []
            if not parallel_tool_calls:
                calls = calls[:1]
            if not calls and grammar.mode == "required" and finish != "length":
                raise UnexpectedModelBehavior(
                    f"the server returned no tool call although tool_choice="
                    f"{request.tool_choice!r} requires one (does it support tool_choice?)",
                    raw_output=text,
                )
        usage = Usage(generation_time_s=elapsed)
        if self._dialect == "gbnf" and grammar.lark is not None and grammar.mode != "none":
            usage.loosened_turns = int(bool(self._gbnf_export(grammar).loosened))
        schema = request.output_schema
        if grammar.mode == "output" and schema is not None and self.constraint in _SCHEMA_MODES:
            taken = _key(self._schema_format(schema, taken=False)) in self._taken
            usage.loosened_turns = int(bool(self._sent(schema)[1]) or taken)
        u = data.get("usage") or {}
        with contextlib.suppress(TypeError, ValueError):
            usage.prompt_tokens = int(u.get("prompt_tokens") or 0)
            usage.completion_tokens = int(u.get("completion_tokens") or 0)
            details = u.get("prompt_tokens_details") or {}
            usage.cached_prompt_tokens = int(details.get("cached_tokens") or 0)
        truncated = finish == "length" and _inside_structure(text, calls, grammar, request)
        return TurnOutput(
            text=text,
            token_ids=[],
            finish_reason="length" if finish == "length" else "stop",
            accepting=not truncated,
            usage=usage,
            calls=calls,
        )

    # ------------------------------------------------------------------ the backend protocol

    def complete_turn(
        self,
        request: TurnRequest,
        grammar: TurnGrammar,
        *,
        max_tokens: int,
        sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 - frozen dataclass
        parallel_tool_calls: bool = True,
    ) -> TurnOutput:
        """One assistant turn from the server (blocking)."""
        name = self.resolve_model()
        body = self.build_request(
            request,
            grammar,
            max_tokens=max_tokens,
            sampling=sampling,
            parallel_tool_calls=parallel_tool_calls,
            model=name,
        )
        t0 = time.perf_counter()
        loosened = False
        try:
            data = self._http("/chat/completions", body)
        except RemoteModelError as exc:
            data = None
            for retry, loose in self._fallbacks(exc, body, grammar):
                self._announce(exc, retry, loose)
                try:
                    data, loosened = self._http("/chat/completions", retry), loose
                    if loose:
                        self._remember(body, retry)
                    break
                except RemoteModelError as again:
                    if self._gave_up(exc, again, loose):
                        raise exc from None
            if data is None:
                raise exc from None
        out = self.parse_response(
            data,
            request,
            grammar,
            parallel_tool_calls=parallel_tool_calls,
            elapsed=time.perf_counter() - t0,
        )
        out.usage.loosened_turns |= loosened
        return out

    async def acomplete_turn(
        self,
        request: TurnRequest,
        grammar: TurnGrammar,
        *,
        max_tokens: int,
        sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 - frozen dataclass
        parallel_tool_calls: bool = True,
    ) -> TurnOutput:
        """One assistant turn from the server (async: the event loop keeps running)."""
        name = await self.aresolve_model()
        body = self.build_request(
            request,
            grammar,
            max_tokens=max_tokens,
            sampling=sampling,
            parallel_tool_calls=parallel_tool_calls,
            model=name,
        )
        t0 = time.perf_counter()
        loosened = False
        try:
            data = await self._ahttp("/chat/completions", body)
        except RemoteModelError as exc:
            data = None
            for retry, loose in self._fallbacks(exc, body, grammar):
                self._announce(exc, retry, loose)
                try:
                    data, loosened = await self._ahttp("/chat/completions", retry), loose
                    if loose:
                        self._remember(body, retry)
                    break
                except RemoteModelError as again:
                    if self._gave_up(exc, again, loose):
                        raise exc from None
            if data is None:
                raise exc from None
        out = self.parse_response(
            data,
            request,
            grammar,
            parallel_tool_calls=parallel_tool_calls,
            elapsed=time.perf_counter() - t0,
        )
        out.usage.loosened_turns |= loosened
        return out


# ------------------------------------------------------------------ helpers


def _key(fmt: Mapping[str, Any]) -> str:
    return json.dumps(fmt, sort_keys=True, default=str)


def _get(body: Mapping[str, Any], dotted: str) -> Any:
    node: Any = body
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _put(body: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = body
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def _schema_name(schema: Mapping[str, Any]) -> str:
    import re

    title = schema.get("title")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", title) if isinstance(title, str) else ""
    return (name or "output")[:64]


def _native_tool_choice(request: TurnRequest) -> Any:
    choice = request.tool_choice
    if choice == "required" and len(request.tools) == 1:
        choice = request.tools[0].name  # the same constraint; servers without "required" take it
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _native_messages(request: TurnRequest) -> list[dict[str, Any]]:
    """The transcript in the OpenAI shape (`openai_message`): calls as `tool_calls`
    (arguments as JSON text), cut out of the text a local model wrote them in, so the server
    does not see them twice. An assistant turn without text keeps `content: ""` (servers
    that refuse a null content take it)."""
    out: list[dict[str, Any]] = []
    for m in request.messages:
        d = openai_message(m, request.fmt)
        if d["content"] is None:
            d["content"] = ""
        out.append(d)
    return out


def _hermes_messages(request: TurnRequest) -> list[dict[str, Any]]:
    """Grammar modes: tools described in the system prompt, calls as text in the assistant
    turns (`prompt_content`: OpenAI-format turns written in the format), results as
    `<tool_response>` user turns: what the turn grammar speaks, as a local tool-trained model
    sees it (servers run tool-trained models)."""
    from sdk.backends.chat_template import _fallback_dicts

    return _fallback_dicts(request, tool_template=True)


def _parsed_call(raw: Any) -> ParsedCall:
    fn = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return ParsedCall("", None, json.dumps(raw), "expected a function call with a name")
    args = fn.get("arguments", {})
    if isinstance(args, str):
        text = args
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return ParsedCall(fn["name"], None, text, f"invalid JSON in the arguments: {exc}")
    else:
        text = json.dumps(args, ensure_ascii=False)
    return ParsedCall(fn["name"], args, text)


def _inside_structure(
    text: str, calls: list[ParsedCall] | None, grammar: TurnGrammar, request: TurnRequest
) -> bool:
    """On `finish_reason="length"`: did the budget run out inside a call or a typed output?
    (Free text cut short is a complete answer, as in local generation.)"""
    if grammar.mode == "none":
        return False
    if grammar.mode in ("output", "required"):
        return True
    if calls:
        return True
    if request.output_schema is not None:
        return True  # auto + output type: the reply is either calls or the typed output
    return request.fmt.opener in text
