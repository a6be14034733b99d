"""``ma-submit configure``: write, list and show named profiles (:mod:`malaunch.sdk.profiles`).

- ``ma-submit configure [--profile NAME] [--backend B] [--image I] [--region R] ... [--set KEY=VALUE]`` sets keys
  of one profile (``default`` unless named); ``--unset KEY`` removes one. A secret (``modelarts.sk``) is never an
  option's value: ``--sk-stdin`` reads it from standard input. On a terminal, with nothing given, it asks for
  each value in turn (the backend first, then that backend's keys; Enter keeps the value shown, a secret is
  typed hidden and shown as hidden).
- ``ma-submit configure list``: the profiles, the one in use marked ``*``.
- ``ma-submit configure show [--profile NAME]``: a profile's keys and values, secrets hidden.

The options are made from the keys the profile module knows (each backend declares its own). Nothing here prints
a secret.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import click

from ..backends.registry import BACKEND_NAMES
from ..errors import ConfigError
from ..profiles.apply import HIDDEN
from ..profiles.check import all_keys, keys_of, selected
from ..profiles.keys import ProfileKey
from ..profiles.store import DEFAULT_PROFILE, PROFILE_VARIABLE, profiles_path, read_profiles, write_profile
from .echo import echo
from .exits import PROG
from .jobs import OUTPUT, echo_json, note, parse_duration

__all__ = ["configure_cmd", "configure_group"]

_PROMPT_FIRST = ("backend", "image", "keep_for")


def _flags() -> Dict[str, Tuple[str, ProfileKey]]:
    """option name (``obs_dir``, ``sk_stdin``) -> (full key, key), for every key: ``--NAME`` unless two backends
    share a name (then ``--BACKEND-NAME``); ``--NAME-stdin`` for a key given on standard input."""
    keys = all_keys()
    counts: Dict[str, int] = {}
    for key in keys.values():
        counts[key.name] = counts.get(key.name, 0) + 1
    out: Dict[str, Tuple[str, ProfileKey]] = {}
    for full, key in keys.items():
        base = key.name if counts[key.name] == 1 else full.replace(".", "_")
        out[f"{base}_stdin" if key.stdin else base] = (full, key)
    return out


_FLAGS = _flags()


def _check_value(full: str, value: str) -> str:
    value = value.strip()
    if not value:
        raise ConfigError(f"{full} is empty", None, f"give a value, or '--unset {full}' to remove it")
    if full == "backend" and value not in BACKEND_NAMES:
        raise ConfigError("backend must be one of: " + ", ".join(BACKEND_NAMES), value, "e.g. --backend local")
    if full == "keep_for":
        try:
            parse_duration(value)
        except ValueError as exc:
            raise ConfigError("keep_for is not a duration", value, f"{exc}") from None
    return value


def _from_stdin(full: str) -> str:
    line = sys.stdin.readline()
    if not line.strip():
        raise ConfigError(f"no value for {full} on standard input", None, "pipe it in, e.g. from a password manager")
    return line.rstrip("\r\n")


def _shown(key: ProfileKey, value: Optional[str]) -> str:
    if value is None:
        return "-"
    return HIDDEN if key.secret else value


def _ask(current: Dict[str, str]) -> Dict[str, Optional[str]]:
    """Ask on the terminal for the shared keys, then the keys of the backend chosen."""
    changes: Dict[str, Optional[str]] = {}

    def one(full: str, key: ProfileKey) -> None:
        now = current.get(full)
        label = f"{full} ({key.help})"
        if key.secret:
            shown = f" [{HIDDEN}]" if now else ""
            typed = click.prompt(label + shown, default="", show_default=False, hide_input=True)
        else:
            typed = click.prompt(label, default=now or "", show_default=bool(now))
        if typed.strip() and typed.strip() != now:
            changes[full] = _check_value(full, typed)

    shared = keys_of(None)
    for full in _PROMPT_FIRST:
        if full == "backend":
            backend = click.prompt(
                "backend", type=click.Choice(BACKEND_NAMES), default=current.get("backend") or BACKEND_NAMES[0]
            )
            if backend != current.get("backend"):
                changes["backend"] = backend
            continue
        one(full, shared[full])
    chosen = changes.get("backend") or current.get("backend") or BACKEND_NAMES[0]
    for full, key in keys_of(chosen).items():
        if full not in shared:
            one(full, key)
    return changes


def _write(name: str, options: Dict[str, Any], pairs: Tuple[str, ...], unset: Tuple[str, ...]) -> int:
    known = all_keys()
    changes: Dict[str, Optional[str]] = {}
    for option, value in options.items():
        full, key = _FLAGS[option]
        if key.stdin and value:
            changes[full] = _check_value(full, _from_stdin(full))
        elif not key.stdin and value is not None:
            changes[full] = _check_value(full, value)
    for pair in pairs:
        full, sep, value = pair.partition("=")
        full = full.strip()
        if not sep or full not in known:
            hint = f"known keys: {', '.join(known)}" if sep else "e.g. --set modelarts.region=cn-north-4"
            raise ConfigError("--set takes KEY=VALUE with a known key", full if sep else pair, hint)
        if known[full].stdin:
            flag = next(f"--{o.replace('_', '-')}" for o, (f, _) in _FLAGS.items() if f == full)
            raise ConfigError(f"{full} is a secret: other users can see a command line", None, f"use {flag}")
        changes[full] = _check_value(full, value)
    for full in unset:
        if full not in known:
            raise ConfigError("--unset takes a known key", full, f"known keys: {', '.join(known)}")
        changes[full] = None
    if not changes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise ConfigError("nothing to configure", None, "give values (see 'ma-submit configure --help'), "
                              "or run it on a terminal to be asked for each")  # fmt: skip
        path = profiles_path(os.environ)
        current = read_profiles(path).get(name, {})
        echo(f"profile {name} in {path} (Enter keeps the value shown)")
        changes = _ask(current)
        if not changes:
            note(f"profile {name}: nothing changed")
            return 0
    profile = write_profile(os.environ, name, changes)
    written = ", ".join(sorted(key for key, value in changes.items() if value is not None)) or "-"
    removed = ", ".join(sorted(key for key, value in changes.items() if value is None))
    note(f"profile {name} written to {profile.path} (set: {written}" + (f"; removed: {removed})" if removed else ")"))
    return 0


def _key_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option, (full, key) in reversed(list(_FLAGS.items())):
        flag = "--" + option.replace("_", "-")
        if key.stdin:
            function = click.option(flag, option, is_flag=True, default=False,
                                    help=f"Read {full} ({key.help}) from standard input.")(function)  # fmt: skip
        else:
            function = click.option(flag, option, metavar="VALUE", help=f"{full}: {key.help}.")(function)
    return function


_EPILOG = (
    "The file: $XDG_CONFIG_HOME/malaunch/profiles.ini (default ~/.config/malaunch/profiles.ini), mode 0600; refused "
    "when group or others can read it. A job file's value beats the profile's, which beats the default; the "
    "environment's variables (HUAWEICLOUD_SDK_*, MALAUNCH_MODELARTS_ENDPOINT, KUBECONFIG) beat the profile. "
    "--dry-run shows where each value came from. See docs/cli.md#profiles."
)


@click.group(
    "configure", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG,
)  # fmt: skip
@click.option("--profile", "name", metavar="NAME", help=f"The profile to write (default: ${PROFILE_VARIABLE}, "
              f"else '{DEFAULT_PROFILE}').")  # fmt: skip
@_key_options
@click.option("--set", "pairs", multiple=True, metavar="KEY=VALUE", help="Set any key (repeatable).")
@click.option("--unset", multiple=True, metavar="KEY", help="Remove a key (repeatable).")
@click.pass_context
def configure_group(ctx: click.Context, /, name: Optional[str], pairs: Tuple[str, ...], unset: Tuple[str, ...],
                    **options: Any) -> int:  # fmt: skip
    """Write a profile: what every job would otherwise repeat (backend, image, bucket, cluster, keys).

    \b
    ma-submit configure                         (on a terminal: asks for each value)
    ma-submit configure --profile ma --backend modelarts --region cn-north-4 \\
        --project-id ID --ak AK --sk-stdin --obs-dir obs://bucket/jobs --image IMAGE < sk.txt
    ma-submit configure --profile k8s --backend volcano --context prod --namespace ml --queue gpu
    ma-submit configure list | show [--profile NAME]
    """
    if ctx.invoked_subcommand is not None:
        given = name or pairs or unset or any(value not in (None, False) for value in options.values())
        if given:
            raise click.UsageError(f"options to write a profile do not go with '{ctx.invoked_subcommand}'", ctx)
        return 0
    chosen = name or os.environ.get(PROFILE_VARIABLE) or DEFAULT_PROFILE
    return _write(chosen, options, pairs, unset)


def _in_use() -> Optional[str]:
    try:
        profile = selected(os.environ)
    except ConfigError:
        return None
    return profile.name if profile is not None else None


@configure_group.command("list")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
def list_cmd(output: str) -> int:
    """List the profiles (* marks the one in use)."""
    path = profiles_path(os.environ)
    profiles = read_profiles(path)
    in_use = _in_use()
    if output == "json":
        echo_json([{"name": name, "backend": values.get("backend"), "in_use": name == in_use}
                   for name, values in sorted(profiles.items())])  # fmt: skip
        return 0
    if not profiles:
        note(f"no profiles in {path}; create one with 'ma-submit configure'")
        return 0
    rows: List[Tuple[str, str, str]] = [("", "PROFILE", "BACKEND")]
    for name, values in sorted(profiles.items()):
        rows.append(("*" if name == in_use else "", name, values.get("backend") or "-"))
    width = max(len(row[1]) for row in rows)
    for mark, name, backend in rows:
        echo(f"{mark:1} {name.ljust(width)}  {backend}")
    return 0


@configure_group.command("show")
@click.option("--profile", "name", metavar="NAME", help="The profile (default: the one in use).")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
def show_cmd(name: Optional[str], output: str) -> int:
    """Show a profile's keys (secrets hidden)."""
    profile = selected(os.environ, name)
    if profile is None:
        path = profiles_path(os.environ)
        raise ConfigError(f"no profile in use in {path}", None, "name one with --profile, or run 'ma-submit configure'")
    known = all_keys()
    shown = {key: _shown(known[key], value) for key, value in sorted(profile.values.items())}
    if output == "json":
        echo_json({"name": profile.name, "path": profile.path, "values": shown})
        return 0
    echo(f"profile {profile.name} ({profile.path})")
    width = max((len(key) for key in shown), default=0)
    for key, value in shown.items():
        echo(f"  {key.ljust(width)}  {value}")
    return 0


@click.command(
    "configure", add_help_option=False, context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def configure_cmd(words: Tuple[str, ...]) -> Any:
    """Write, list or show named profiles (see 'ma-submit configure --help')."""
    return configure_group.main(list(words), prog_name=f"{PROG} configure", standalone_mode=False)
