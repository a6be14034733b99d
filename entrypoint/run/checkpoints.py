"""The shim's side of the checkpoint contract: before each attempt, which checkpoint it resumes from, and what goes.

With ``MALAUNCH_CHECKPOINT_DIR`` set (:class:`~..contract.config.Checkpoints`), the attempt loop
(:class:`~.attempts.AttemptLoop`, one host or several) calls :meth:`CheckpointKeeper.before` ahead of every
attempt; the folder's layout is :mod:`..contract.checkpoint_dir`'s.

1. At start (:meth:`CheckpointKeeper.check`), the folder is made if missing and must take a file: a folder that
   is not writable ends the shim with exit 2 and one line, before any rank starts.
2. ``MALAUNCH_RESUME_FROM`` is the newest complete checkpoint's folder, in every attempt after one exists, and
   unset before (a value inherited from outside is dropped). Each incomplete or damaged folder newer than it is
   passed over with one line saying which and why. A folder that cannot be read before an attempt (gone, a file
   now, its mount lost) holds none: one line says so, with the newest complete one it held before.
3. Retention (every host, each of its own view of the folder): the ``keep`` newest complete checkpoints stay;
   older complete ones go, and incomplete ones older than the newest complete one. The newest complete one, and
   an incomplete one newer than it (a save that may still be written, or the one a killed rank left), are never
   removed. Every host prunes because a node's folder may be its own (ModelArts: an output channel per node),
   where no other host could; where the folder is one folder for every host (local, Volcano) the hosts decide
   by the same rule from the same folder, so they remove the same sub-folders (a removal that finds the folder
   gone already is no error; each is renamed to a hidden name before its files go, so no host reads one half
   removed), and what a host may see that another did not yet (a save completed or begun since) is newer than
   what the rule removes.
4. With ``MALAUNCH_RESUME_SOURCE`` (another job's checkpoint, :func:`..contract.checkpoint_list.resume_point`),
   checked at start: one that names no complete checkpoint ends the shim with exit 2 and one line saying which
   folder and why. It is ``MALAUNCH_RESUME_FROM`` in every attempt until the job's own folder holds a complete
   checkpoint; from then on the job's own newest wins.
5. Several hosts (:mod:`.hosts.saves`): an attempt whose ``start`` names the checkpoint the job's hosts completed
   together (:attr:`CheckpointKeeper.agreed`, that checkpoint's folder name) resumes from it on every host, even
   where this host's folder holds a complete one that is newer (passed over with one line, never removed):
   retention counts from it as from the newest complete one.
6. Before the first attempt host 0 also clears the parts (``.parts``) left in incomplete checkpoints by an
   earlier run of the job, so that a save of the same step in this run counts only this run's parts (within one
   run, parts carry the attempt). On several hosts host 0 does this before its coordinator serves, so no host's
   rank of this run is started yet.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from ..contract.checkpoint_dir import PARTS, Found, newest, reached, scan
from ..contract.checkpoint_list import resume_point
from ..contract.config import Checkpoints
from ..contract.errors import ConfigError

__all__ = ["DIR_VAR", "RESUME_VAR", "SOURCE_VAR", "CheckpointKeeper"]

RESUME_VAR = "MALAUNCH_RESUME_FROM"
DIR_VAR = "MALAUNCH_CHECKPOINT_DIR"
SOURCE_VAR = "MALAUNCH_RESUME_SOURCE"
_REMOVING = ".removing-"  # a checkpoint retention is removing (hidden: never a checkpoint)


class CheckpointKeeper:
    """Checks the checkpoint folder at start; before each attempt, prunes it and says where the attempt resumes."""

    def __init__(self, config: Checkpoints, first_host: bool, say: Callable[[str], None]) -> None:
        self.config, self.first_host, self.say = config, first_host, say
        self.resume: Optional[str] = None
        self.source: Optional[Found] = None  # another job's checkpoint (MALAUNCH_RESUME_SOURCE), once checked
        self.agreed: Optional[str] = None  # the checkpoint the job's hosts agree on for the next attempt (rule 5)
        self.held: Optional[Tuple[int, Found]] = None  # the newest complete one found, before which attempt

    def check(self) -> None:
        """Make the folder if missing and prove it takes a file.

        Raises:
            ConfigError: the folder cannot be made or written (exit 2, one line).
        """
        folder = self.config.directory
        probe = os.path.join(folder, f".write-test-{os.getpid()}")
        try:
            os.makedirs(folder, exist_ok=True)
            with open(probe, "wb"):
                pass
            os.unlink(probe)
        except OSError as error:
            raise ConfigError(DIR_VAR, folder, f"the checkpoint folder is not writable ({_why(folder, error)}): "
                              "point MALAUNCH_CHECKPOINT_DIR at a folder this user can write") from None  # fmt: skip
        given = self.config.source
        if given is not None:
            found = resume_point(given)
            if isinstance(found, str):
                raise ConfigError(SOURCE_VAR, given, f"nothing to resume from: {found}; name a complete checkpoint "
                                  "(ma-submit checkpoints JOB_ID lists them)")  # fmt: skip
            self.source = found

    def clear_stale_parts(self) -> None:
        """Host 0, before the first attempt: remove the parts an earlier run left in incomplete checkpoints."""
        if not self.first_host:  # a replaced host joins while the others' ranks may be saving
            return
        for item in scan(self.config.directory):
            if not item.complete:
                shutil.rmtree(os.path.join(item.path, PARTS), ignore_errors=True)

    def before(self, attempt: int) -> Optional[str]:
        """Before attempt ``attempt``: prune, say what is passed over; the folder to resume from."""
        found = scan(self.config.directory)
        self._readable(attempt)
        best = newest(found)
        if best is not None:
            self.held = (attempt, best)
        agreed = next((item for item in found if item.complete and item.name == self.agreed), None)
        if agreed is not None and best is not None and agreed.order() < best.order():
            for item in found:
                if item.complete and item.order() > agreed.order():
                    self.say(f"checkpoint {item.path} passed over: it is newer than {agreed.name} (step "
                             f"{agreed.order()[0]}), the newest checkpoint the job's hosts completed together; "
                             "resuming from that one on every host")  # fmt: skip
            best = agreed
        if best is not None:
            found = self._prune(found, best)
        for item in found:
            if not item.complete and (best is None or _newer(item, best)):
                instead = f"; resuming from {best.name} (step {best.order()[0]})" if best is not None else ""
                self.say(f"checkpoint {item.path} passed over: {item.why}{instead}")
        if best is not None and (attempt > 0 or best.path != self.resume):
            got = reached(self.config.directory)
            far = f"; the ranks had reached step {got}" if got is not None else ""
            self.say(f"attempt {attempt} resumes from {best.path} (step {best.order()[0]}{far}; MALAUNCH_RESUME_FROM)")
        if best is None and self.source is not None:
            source = self.source
            if attempt > 0 or source.path != self.resume:
                self.say(f"attempt {attempt} resumes from another job's checkpoint {source.path} (step "
                         f"{source.order()[0]}; MALAUNCH_RESUME_FROM, from MALAUNCH_RESUME_SOURCE)")  # fmt: skip
            best = source
        self.resume = best.path if best is not None else None
        return self.resume

    def _readable(self, attempt: int) -> None:
        """Say so when the folder cannot be read (gone, replaced by a file, its mount lost since the start): the
        attempt then finds no checkpoint in it, and would start from the beginning without a word."""
        folder = self.config.directory
        try:
            with os.scandir(folder):
                return
        except OSError as error:
            why = _why(folder, error)
        starts = "starts from the beginning" if self.source is None else "resumes from another job's checkpoint"
        held = ""
        if self.held is not None:
            before, found = self.held
            held = f"; it held {found.name} (step {found.order()[0]}) before attempt {before}"
        self.say(f"checkpoint folder {folder} cannot be read before attempt {attempt} ({why}): no checkpoint to "
                 f"resume from, so attempt {attempt} {starts}{held}: restore it, or point {DIR_VAR} at the folder "
                 "that holds it")  # fmt: skip

    def env(self, base_env: Mapping[str, str]) -> Dict[str, str]:
        """``base_env`` with ``MALAUNCH_RESUME_FROM`` as :meth:`before` chose it (unset when there is none)."""
        env = {name: value for name, value in base_env.items() if name != RESUME_VAR}
        if self.resume is not None:
            env[RESUME_VAR] = self.resume
        return env

    def _prune(self, found: List[Found], best: Found) -> List[Found]:
        """Remove what retention says goes; the folders that stay."""
        complete = sorted((item for item in found if item.complete), key=Found.order, reverse=True)
        doomed = {item.path for item in complete[self.config.keep :]}
        doomed.update(item.path for item in found if not item.complete and not _newer(item, best))
        doomed.discard(best.path)
        doomed.difference_update(item.path for item in complete if item.order() > best.order())  # rule 5
        _clear_leftovers(self.config.directory)
        removed = [item.name for item in found if item.path in doomed and _remove(item.path)]
        if removed:
            self.say(f"checkpoints removed (keeping the {self.config.keep} newest complete): {', '.join(removed)}")
        return [item for item in found if item.name not in removed]


def _remove(path: str) -> bool:
    """Remove the checkpoint ``path`` so that no reader sees it half removed (another host's scan would say it has
    no ``.complete``, or find its marker with part of its data gone): renamed first to a hidden name, never a
    checkpoint, then deleted. Whether it is gone (another host sharing the folder may have taken it first)."""
    parent, name = os.path.split(path)
    hidden = os.path.join(parent, f"{_REMOVING}{name}-{os.getpid()}-{os.urandom(3).hex()}")
    try:
        os.rename(path, hidden)
    except FileNotFoundError:
        return True
    except OSError:  # a folder that cannot be renamed is removed where it is
        hidden = path
    shutil.rmtree(hidden, ignore_errors=True)
    return not os.path.exists(path)


def _clear_leftovers(directory: str) -> None:
    """Finish the removals a shim ended in the middle of (its hidden folders)."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith(_REMOVING) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


def _why(folder: str, error: OSError) -> str:
    """Why ``folder`` cannot serve as the checkpoint folder: what is there instead (a file, a link that leads
    nowhere), else the error's own words."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        try:
            os.stat(folder)
        except OSError as found:
            return found.strerror or str(found)  # a link loop, a link to nothing
        return "it is a file, not a folder"
    return error.strerror or str(error)


def _newer(item: Found, best: Found) -> bool:
    """Whether the incomplete ``item`` is newer than the complete ``best``: by the step its parts record, else by
    its files' times against ``best``'s."""
    if item.step is not None:
        return item.step >= best.order()[0]
    return item.touched >= best.touched
