"""One question to a VLM: ask → validate → at most one repair round, never a crash on a malformed answer.

Every caller that wants structured output (the planner's Sample, Optimize and TaskSuccess queries, the robot's
judge, real2sim's object labels, cluster assignment and physics questions) goes through :func:`ask`: the
request is sent under ``role``; the caller's ``validate`` reads the answer into a verdict (anything with
``ok``, ``kind`` and ``errors``, e.g. :class:`~simpact.vlm.answers.PlanAnswer` or :class:`Checked`); an
unusable answer is echoed back with :func:`repair_message` under ``<role>/repair`` once. What came back is an
:class:`Asked`: each round's verdict, each request as an :class:`Exchange` (for the record), the failure that
stopped it, and why it is unusable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from simpact.vlm import VLM, VLMAnswer, VLMError
from simpact.vlm.answers import AnswerKind, EvaluationAnswer, JSONAnswer, PlanAnswer, parse_json
from simpact.vlm.prompts import render_prompt

__all__ = [
    "Asked",
    "Checked",
    "Exchange",
    "Verdict",
    "ask",
    "check_json",
    "echo_answer",
    "echo_quoted",
    "failure_text",
    "repair_message",
]

T = TypeVar("T")


class Verdict(Protocol):
    """What a validator says about one answer: usable or not, what kind of answer, what to fix."""

    @property
    def ok(self) -> bool: ...

    @property
    def kind(self) -> AnswerKind: ...

    @property
    def errors(self) -> Sequence[str]: ...


V = TypeVar("V", bound=Verdict)


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A caller's reading of an answer: the ``value`` read (possibly partial when not ``ok``) and the
    ``errors`` to send back for repair."""

    value: T | None
    errors: tuple[str, ...] = ()
    kind: AnswerKind = AnswerKind.OK

    @property
    def ok(self) -> bool:
        return self.kind is AnswerKind.OK


def check_json(answer: VLMAnswer, read: Callable[[Any], tuple[T | None, Sequence[str]]]) -> Checked[T]:
    """Find the answer's JSON (:func:`~simpact.vlm.answers.parse_json`) and ``read`` it into a value and
    its problems; no JSON is a problem of its own kind (empty, refusal, truncated...)."""
    parsed = parse_json(answer)
    if not parsed.ok:
        return Checked(None, (parsed.error or "the answer has no JSON",), parsed.kind)
    value, problems = read(parsed.data)
    return Checked(value, tuple(problems), AnswerKind.INVALID if problems else AnswerKind.OK)


@dataclass(frozen=True)
class Exchange:
    """One request and what came of it: the ``parts`` sent, the ``answer`` (None when it failed) or the
    ``error`` text."""

    role: str
    parts: tuple[Any, ...]
    answer: VLMAnswer | None
    error: str | None = None

    @property
    def prompt(self) -> str:
        """The text this request added: the caller's prompt, or the repair message."""
        return next((p for p in reversed(self.parts) if isinstance(p, str)), "")

    @property
    def text(self) -> str | None:
        return self.answer.text if self.answer is not None else None

    def summary(self) -> dict[str, Any]:
        """Role, the prompt this request added, and the answer text."""
        return {"role": self.role, "prompt": self.prompt, "answer": self.text}

    def to_dict(self) -> dict[str, Any]:
        """The full record: every text part, the image count, the answer or error and its accounting
        (latency in s, token counts)."""
        entry: dict[str, Any] = {
            "role": self.role,
            "prompt": "\n\n".join(p for p in self.parts if isinstance(p, str)),
            "images": sum(not isinstance(p, str) for p in self.parts),
            "answer": self.text,
            "error": self.error,
        }
        if self.answer is not None:
            a = self.answer
            entry.update(
                model=a.model,
                latency_s=round(a.latency_s, 3),
                input_tokens=a.input_tokens,
                output_tokens=a.output_tokens,
                finish_reason=a.finish_reason,
            )
        return entry


def failure_text(exc: BaseException) -> str:
    """Why a request gave no answer: ``VLM error: ...`` for a VLM's own errors, else the exception's type."""
    return f"VLM error: {exc}" if isinstance(exc, VLMError) else f"{type(exc).__name__}: {exc}"


def _error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, VLMError) else f"{type(exc).__name__}: {exc}"


def _verdict_text(v: Verdict, fallback: str = "") -> str:
    return f"{v.kind.value}: {'; '.join(v.errors) or fallback}"


@dataclass
class Asked(Generic[V]):
    """The outcome of :func:`ask`: each round's verdict, each request, and the failure that stopped it."""

    verdicts: list[V] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    error: BaseException | None = None
    """A caught failure of the request (the VLM's, or with ``catch=(Exception,)`` any)."""

    @property
    def result(self) -> V | None:
        """The usable verdict, or None."""
        last = self.verdicts[-1] if self.verdicts else None
        return last if last is not None and last.ok and self.error is None else None

    @property
    def repairs(self) -> int:
        """Repair requests sent (0 or 1)."""
        return max(len(self.exchanges) - 1, 0)

    @property
    def reason(self) -> str:
        """Why there is no usable verdict (empty when there is): the first answer's problems, then the
        repair's, or the failure."""
        if self.result is not None:
            return ""
        if not self.verdicts:
            return failure_text(self.error) if self.error is not None else "no answer"
        first = _verdict_text(self.verdicts[0], "unusable answer")
        if self.error is not None:
            return f"{first}; repair: {failure_text(self.error)}"
        if len(self.verdicts) > 1:
            return f"{first}; after repair {_verdict_text(self.verdicts[-1])}"
        return first


def echo_answer(text: str) -> list[str]:
    """The unusable answer sent back as it was (nothing when it was blank)."""
    return [text] if text.strip() else []


def echo_quoted(text: str) -> list[str]:
    """The unusable answer sent back introduced as ``Your answer was:``."""
    return [f"Your answer was:\n{text}"]


def repair_message(errors: Sequence[str] | PlanAnswer | EvaluationAnswer | JSONAnswer) -> str:
    """The follow-up prompt for one repair round: what was wrong, and to answer again in full."""
    if isinstance(errors, JSONAnswer):
        items: Sequence[str] = [errors.error] if errors.error else []
    elif isinstance(errors, (PlanAnswer, EvaluationAnswer)):
        items = errors.errors
    else:
        items = [errors] if isinstance(errors, str) else list(errors)
    listed = "\n".join(f"- {e}" for e in items) or "- the answer could not be read"
    return render_prompt("repair", errors=listed)


def ask(
    vlm: VLM,
    parts: Sequence[Any],
    schema: Mapping[str, Any] | None,
    validate: Callable[[VLMAnswer], V],
    *,
    role: str,
    temperature: float | None = None,
    echo: Callable[[str], list[str]] = echo_answer,
    catch: tuple[type[BaseException], ...] = (VLMError,),
    record: Callable[[Exchange], None] | None = None,
) -> Asked[V]:
    """Ask ``vlm`` (request ``parts`` with ``schema``, under ``role``) and ``validate`` the answer; an
    unusable one is answered with the same parts, ``echo(answer text)`` and :func:`repair_message` of its
    errors, once, under ``<role>/repair``.

    A failure of a request whose type is in ``catch`` ends the question and is kept in ``Asked.error``
    (others propagate; ``catch=()`` lets every failure through). ``record`` receives each request's
    :class:`Exchange` as soon as it is done. Never raises on a malformed answer.
    """
    asked: Asked[V] = Asked()
    sent = list(parts)
    for name in (role, f"{role}/repair"):
        try:
            answer = vlm.generate(sent, schema, temperature=temperature, role=name)
        except catch as exc:
            asked.error = exc
            _note(asked, Exchange(name, tuple(sent), None, _error_text(exc)), record)
            return asked
        _note(asked, Exchange(name, tuple(sent), answer), record)
        verdict = validate(answer)
        asked.verdicts.append(verdict)
        if verdict.ok:
            break
        sent = [*sent, *echo(answer.text), repair_message(verdict.errors)]
    return asked


def _note(asked: Asked[Any], exchange: Exchange, record: Callable[[Exchange], None] | None) -> None:
    asked.exchanges.append(exchange)
    if record is not None:
        record(exchange)
