"""Values that must never be written to a record or a log, nor shown on a terminal.

Runtime policy is recorded by value (that is what makes a receipt useful), but
an environment also carries credentials: a hub token passed with `--env`, an
index URL with a password in it. A variable whose name says it holds a
secret is recorded by name only, and credentials inside URLs are cut out of
every other value. Program arguments are redacted the same way (`argv`). The
process itself still gets the real value: only what is written down is redacted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

REDACTED = "<redacted>"
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|ACCOUNT_?KEY|AUTH|COOKIE"
    r"|(^|_)(KEY|PASS|PASSPHRASE|PAT|PWD|SAS)$",
    re.I,
)
# user:password@ up to the last @ before whitespace (a password may hold '/' and '@'), or token@
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?:[^/\s:@]*:[^\s]*@|[^/\s]*@)(?=[^\s@]*(?:\s|$))")
# signed URLs and token query parameters (?token=..., &X-Amz-Signature=..., &sig=..., ?api_key=...)
URL_QUERY_SECRET = re.compile(
    r"(?P<key>[?&;](?:[\w.-]*(?:token|signature|secret|passw(?:or)?d|credential|key|auth)[\w.-]*|sig|pwd|sas)=)"
    r"[^&;\s#]*",
    re.I,
)
# NAME=value inside a value: connection strings (Azure AccountKey=...;), `auth=...`, `password=...`
INLINE_SECRET = re.compile(
    r"(?P<key>\b(?:account_?key|shared_?access_?(?:key|signature)|password|passwd|pwd|secret|token|auth"
    r"|api_?key|access_?key|client_?secret)=)[^\s;&,]*",
    re.I,
)
# webhook URLs carry their credential in the path
WEBHOOK = re.compile(
    r"(?P<key>https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:[\w-]+\.)*discord(?:app)?\.com/api/webhooks"
    r"|[^\s/]+(?:/[^\s/?#]+)*?/webhooks?)/)[^\s]+",
    re.I,
)
# credentials recognisable by their shape alone
TOKEN_SHAPE = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[\w-]{10,}|AKIA[0-9A-Z]{16}|AIza[\w-]{35}"
    r"|eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]+)"
)
# Argument names (flags, KEY=VALUE overrides) whose value is a credential, by their words.
_SECRET_WORDS = {
    "token", "secret", "password", "passwd", "pwd", "passphrase", "credential", "credentials",
    "apikey", "auth", "cookie", "pat", "accountkey", "sas",
}  # fmt: skip
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("account", "key"), ("secret", "key")}
EXTRA_ARGS_ENV = "ORCH_SECRET_ARGS"  # more argument names to redact, comma-separated


def is_secret(name: str) -> bool:
    """True for a variable whose name says it holds a credential."""
    return bool(SECRET_NAME.search(name))


def text(value: str) -> str:
    """Free text (a value, an argument) with every credential-shaped part cut out."""
    value = URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", str(value))
    value = WEBHOOK.sub(lambda m: f"{m.group('key')}{REDACTED}", value)
    value = URL_QUERY_SECRET.sub(lambda m: f"{m.group('key')}{REDACTED}", value)
    value = INLINE_SECRET.sub(lambda m: f"{m.group('key')}{REDACTED}", value)
    return TOKEN_SHAPE.sub(REDACTED, value)


def value(name: str, text_: str) -> str:
    """`text_` as it may be written down for the variable `name`."""
    if is_secret(name):
        return REDACTED
    return text(text_)


def env(variables: Mapping[str, str]) -> dict[str, str]:
    """An environment as it may be written down: same names, secret values redacted."""
    return {k: value(k, v) for k, v in variables.items()}


def is_secret_arg(name: str, extra: Iterable[str] = ()) -> bool:
    """True for an argument name (`--hf-token`, `db.password`, `API_KEY`) whose value is a credential.

    By whole words, so `--max-tokens` and `--tokenizer` keep their values; `extra` names more.
    """
    bare = name.lstrip("-")
    marked = {e.strip().lstrip("-").lower() for e in extra if e.strip()}
    if bare.lower() in marked or bare.rsplit(".", 1)[-1].lower() in marked:
        return True
    words = [w for w in re.split(r"[-_.]+", bare.lower()) if w]
    return (
        any(w in _SECRET_WORDS for w in words)
        or any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False))
        or words == ["key"]
    )


def argv(args: Sequence[str], extra: Iterable[str] | None = None) -> list[str]:
    """Program arguments as they may be written down (plan.json, run.json, receipts, reports).

    The value of a credential-named argument is redacted (`--hf-token X`, `--password=X`,
    `db.password=X`), and credential-shaped text anywhere (URLs with a password, signed
    URLs, webhook URLs, `AccountKey=...`, well-known token formats). More names can be
    marked in $ORCH_SECRET_ARGS (comma-separated). The process itself gets the real arguments.
    """
    marked = list(extra) if extra is not None else os.environ.get(EXTRA_ARGS_ENV, "").split(",")
    out: list[str] = []
    hide_next = False
    for arg in args:
        arg = str(arg)
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag = re.fullmatch(r"(-{1,2}[A-Za-z0-9][\w.-]*)(?:=(.*))?", arg, re.S)
        pair = re.fullmatch(r"([A-Za-z_][\w.-]*)=(.*)", arg, re.S)
        if flag and is_secret_arg(flag.group(1), marked):
            if flag.group(2) is None:
                out.append(arg)
                hide_next = True
            else:
                out.append(f"{flag.group(1)}={REDACTED}")
        elif pair and is_secret_arg(pair.group(1), marked):
            out.append(f"{pair.group(1)}={REDACTED}")
        else:
            out.append(text(arg))
    return out
