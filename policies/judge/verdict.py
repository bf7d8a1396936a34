"""One finding of validation: which policy, which rule, which object, which field, what to do."""

from __future__ import annotations

from policies.model.policy import Action


class Verdict:
    """Made once per rule, cap or check that denies, warns or audits, up to several a pod: a
    plain class (the value-class rule, docs/architecture.md), set once and never changed."""

    __slots__ = ("policy", "rule", "path", "message", "action", "subject")

    def __init__(self, policy: str, rule: str, path: str, message: str, action: Action, subject: str = "") -> None:
        self.policy = policy
        self.rule = rule
        self.path = path
        self.message = message
        self.action = action
        self.subject = subject

    def _key(self) -> tuple[str, str, str, str, Action, str]:
        return (self.policy, self.rule, self.path, self.message, self.action, self.subject)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Verdict):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Verdict(policy={self.policy!r}, rule={self.rule!r}, path={self.path!r}, message={self.message!r}, "
            f"action={self.action!r}, subject={self.subject!r})"
        )

    def __str__(self) -> str:
        where = ", ".join(part for part in (f"rule {self.rule}", self.path, self.subject) if part)
        return f"{self.message} [{where}]"

    def about(self, subject: str) -> Verdict:
        return Verdict(self.policy, self.rule, self.path, self.message, self.action, subject)

    def acting(self, action: Action, message: str | None = None) -> Verdict:
        """The same finding with another action (and message)."""
        text = self.message if message is None else message
        return Verdict(self.policy, self.rule, self.path, text, action, self.subject)

    def excused(self) -> Verdict:
        """A denial the object earned before an UPDATE too, as a warning (ratcheting,
        policies.judge.validation.ratchet)."""
        if self.action is not Action.DENY:
            return self
        return self.acting(Action.WARN, f"already so before this update: {self.message}")
