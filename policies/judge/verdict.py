"""One finding of validation: which policy, which rule, which object, which field, what to do."""

from __future__ import annotations

from dataclasses import dataclass

from policies.model.policy import Action


@dataclass(frozen=True, slots=True)
class Verdict:
    policy: str
    rule: str
    path: str
    message: str
    action: Action
    subject: str = ""

    def __str__(self) -> str:
        where = ", ".join(part for part in (f"rule {self.rule}", self.path, self.subject) if part)
        return f"{self.message} [{where}]"

    def about(self, subject: str) -> Verdict:
        return Verdict(self.policy, self.rule, self.path, self.message, self.action, subject)

    def excused(self) -> Verdict:
        """A denial the object earned before an UPDATE too, as a warning (ratcheting,
        policies.judge.validation.ratchet)."""
        if self.action is not Action.DENY:
            return self
        message = f"already so before this update: {self.message}"
        return Verdict(self.policy, self.rule, self.path, message, Action.WARN, self.subject)
