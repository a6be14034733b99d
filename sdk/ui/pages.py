"""The pages and the parts of pages the server sends, as :class:`~.markup.Markup` (every text from a job escaped).

Each function takes what it shows (statuses, events, rows) and returns HTML; none reads a backend. The server
(:mod:`.server`) gathers, these render. Parts (``summary``, ``timeline``, ``events``, ``usage``) are sent alone
too, for the page's small script to refresh while the job runs.
"""

from __future__ import annotations

import time
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple
from urllib.parse import urlencode

from ..backends.checkpoints import CheckpointListing, state_text
from ..backends.events import JobEvent
from ..cli.actions import format_age
from ..progress_text import progress_line
from ..status import JobState, JobStatus
from ..sweep.results import TrialResult
from ..units import size_text
from .listing import Listing
from .markup import Markup, html, join
from .svg import Series, accelerator_series, line_chart, scatter, timeline_svg
from .timeline import Timeline
from .usage import Sample

__all__ = [
    "Filters",
    "link",
    "report_text",
    "action_page",
    "confirm_page",
    "events_part",
    "job_page",
    "jobs_page",
    "layout",
    "message_page",
    "progress_part",
    "summary_part",
    "sweep_page",
    "sweeps_page",
    "timeline_part",
    "usage_part",
]

_STATES = [state.value for state in JobState]
#: What each action does, as the CLI's help says it.
_MEANING = {
    "stop": "Stop {id}; returns when nothing of it is left running (stopping an ended job is a no-op).",
    "delete": "Delete {id} and its files (a running job must be stopped first).",
}


def link(path: str, **query: object) -> str:
    """``path?query`` (values URL-encoded; None left out)."""
    given = {key: str(value) for key, value in query.items() if value is not None and value != ""}
    return f"{path}?{urlencode(given)}" if given else path


def _stamp(when: Optional[float]) -> str:
    return "-" if when is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(when)) + "Z"


def _code(code: Optional[int]) -> str:
    return "-" if code is None else str(code)


def layout(title: str, body: Markup, *, live: bool = False) -> Markup:
    """The whole page around ``body``."""
    return html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} - malaunch</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/app.css"><script src="/static/app.js" defer></script></head>'
        '<body data-live="{live}"><nav><a href="/">Jobs</a> <a href="/sweeps">Sweeps</a>'
        '<span class="brand">malaunch</span></nav><main>{body}</main></body></html>',
        title=title, body=body, live="1" if live else "0",
    )  # fmt: skip


def message_page(title: str, text: str, *, back: str = "/") -> Markup:
    """A page that says one thing (an error, a refusal) and links back."""
    return layout(title, html('<h1>{t}</h1><p class="message">{x}</p><p><a href="{b}">back</a></p>', t=title, x=text,
                              b=back))  # fmt: skip


class Filters(NamedTuple):
    """The jobs page's filters and where its page starts."""

    state: str = ""
    name: str = ""
    backend: str = ""
    offset: int = 0


def _state(state: str) -> Markup:
    return html('<span class="state state-{k}">{s}</span>', k=state.lower(), s=state)


def jobs_page(listing: Listing, filters: Filters, backends: Sequence[str], size: int, now: float) -> Markup:
    """The jobs of every backend shown: filters, errors in place, the table and links to the pages around."""
    states = join(html('<option value="{v}"{sel}>{v}</option>', v=state,
                       sel=Markup(" selected") if state == filters.state else Markup(""))
                  for state in _STATES)  # fmt: skip
    names = join(html('<option value="{v}"{sel}>{v}</option>', v=name,
                      sel=Markup(" selected") if name == filters.backend else Markup(""))
                 for name in backends)  # fmt: skip
    form = html(
        '<form class="filters" method="get" action="/"><label>state <select name="state"><option value="">any'
        '</option>{states}</select></label> <label>name <input name="name" value="{name}" placeholder="train-*">'
        '</label> <label>backend <select name="backend"><option value="">all</option>{names}</select></label> '
        '<button type="submit">Filter</button></form>',
        states=states, name=filters.name, names=names,
    )  # fmt: skip
    errors = join(html('<div class="error" data-backend="{b}"><b>{b}</b>: {e}</div>', b=name, e=text)
                  for name, text in listing.errors)  # fmt: skip
    notes = join(html('<div class="note">{n}</div>', n=text) for text in listing.notes)
    rows = join(
        html('<tr data-id="{id}"><td><a href="{href}">{id}</a></td><td>{state}</td><td>{b}</td><td>{name}</td>'
             '<td>{age}</td><td>{hosts}</td><td>{restarts}</td><td>{code}</td></tr>',
             id=row.status.id, href=link("/job", b=row.backend, id=row.status.id), state=_state(row.status.state.value),
             b=row.backend, name=row.status.name or "-",
             age=format_age(None if row.status.created_at is None else now - row.status.created_at),
             hosts="-" if row.hosts is None else row.hosts, restarts="-" if row.restarts is None else row.restarts,
             code=_code(row.status.exit_code))
        for row in listing.rows
    )  # fmt: skip
    table = html('<table class="jobs"><thead><tr><th>job</th><th>state</th><th>backend</th><th>name</th><th>age</th>'
                 '<th>hosts</th><th>restarts</th><th>exit code</th></tr></thead><tbody>{rows}</tbody></table>',
                 rows=rows) if listing.rows else html('<p class="empty">no jobs</p>')  # fmt: skip
    query = {"state": filters.state, "name": filters.name, "backend": filters.backend}
    pager: List[Markup] = []
    if filters.offset > 0:
        newer = link("/", **query, offset=max(filters.offset - size, 0))
        pager.append(html('<a rel="prev" href="{h}">newer</a>', h=newer))
    first, last = filters.offset + 1, filters.offset + len(listing.rows)
    pager.append(html('<span>{a}-{b} of {n}</span>', a=first if listing.rows else 0, b=last, n=last + listing.more))
    if listing.more:
        pager.append(html('<a rel="next" href="{h}">older</a>', h=link("/", **query, offset=filters.offset + size)))
    body = html('<h1>Jobs</h1>{form}{errors}{notes}{table}<p class="pager">{pager}</p>', form=form, errors=errors,
                notes=notes, table=table, pager=join(pager, " "))  # fmt: skip
    return layout("Jobs", body)


def summary_part(status: JobStatus, restarts: Optional[int]) -> Markup:
    """The job's state, what it says, and its hosts with theirs."""
    facts: List[Tuple[str, object]] = [
        ("state", _state(status.state.value)), ("exit code", _code(status.exit_code)), ("backend", status.backend),
        ("name", status.name or "-"), ("created", _stamp(status.created_at)), ("started", _stamp(status.started_at)),
        ("ended", _stamp(status.ended_at)), ("restarts", "-" if restarts is None else restarts),
        ("location", status.location or "-"),
    ]  # fmt: skip
    if status.message:
        facts.append(("message", status.message))
    if status.pending_reason:
        facts.append(("waiting", status.pending_reason))
    if status.failure_class:
        failure = status.failure_class
        retry = "retryable" if failure.get("retryable") else "not retryable"
        facts.append(("failure class", f"{failure.get('class')} ({retry}): {failure.get('description') or ''}"))
    dl = join(html("<dt>{k}</dt><dd>{v}</dd>", k=key, v=value) for key, value in facts)
    hosts = join(
        html('<tr><td>{i}</td><td>{a}</td><td>{s}</td><td>{pid}</td><td>{code}</td><td>{d}</td></tr>', i=host.index,
             a=host.address, s=_state(host.state.value), pid=host.pid or "-", code=_code(host.exit_code),
             d=host.detail or "")
        for host in status.hosts
    )  # fmt: skip
    table = html('<table class="hosts"><thead><tr><th>host</th><th>address</th><th>state</th><th>pid</th>'
                 '<th>exit code</th><th>detail</th></tr></thead><tbody>{rows}</tbody></table>',
                 rows=hosts) if status.hosts else Markup("")  # fmt: skip
    ended = Markup(' data-ended="1"') if status.is_terminal else Markup("")
    return html('<div class="summary"{ended}><dl>{dl}</dl>{table}</div>', ended=ended, dl=dl, table=table)


def timeline_part(line: Timeline, now: float) -> Markup:
    """The attempts drawn, and the same as a table (each attempt's start, end, outcome and cause)."""
    rows = join(
        html('<tr class="attempt-row" data-outcome="{o}"><td>{n}</td><td>{s}</td><td>{e}</td><td>{o}{h}</td>'
             '<td>{c}</td></tr>', n=attempt.number, s=_stamp(attempt.start),
             e="running" if attempt.end is None else _stamp(attempt.end), o=attempt.outcome,
             h=" (hang)" if attempt.hang else "", c=attempt.cause or "")
        for attempt in line.attempts
    )  # fmt: skip
    marks = join(html("<li>{t} {k}: {l}</li>", t=_stamp(m.time), k=m.kind, l=m.label) for m in line.markers)
    recoveries = join(html('<li data-attempt="{n}">{s}; {l}</li>', n=r.attempt, s=r.summary(now), l=r.line)
                      for r in line.recoveries)  # fmt: skip
    return html('{svg}<table class="attempts"><thead><tr><th>attempt</th><th>start</th><th>end</th><th>outcome</th>'
                '<th>cause</th></tr></thead><tbody>{rows}</tbody></table><ul class="markers">{marks}</ul>'
                '<ul class="recoveries">{recoveries}</ul>',
                svg=timeline_svg(line, now), rows=rows, marks=marks, recoveries=recoveries)  # fmt: skip


def progress_part(status: JobStatus, listing: Optional[CheckpointListing], error: str, now: float) -> Markup:
    """How far the job got (``ma-submit status``'s progress line) and its checkpoints (``ma-submit checkpoints``'
    rows: name, step, time, size, state and why), or the line the backend refused the listing with."""
    said = progress_line(status.progress, status.state is JobState.RUNNING, now)
    line = html('<p class="progress">{s}</p>', s=said) if said is not None else \
        html('<p class="progress empty">no rank reported progress (a script reports its steps with '
             'checkpoint.progress(step, total))</p>')  # fmt: skip
    if error:
        return html('{line}<div class="error" id="checkpoints-error">{e}</div>', line=line, e=error)
    if listing is None or not listing.rows:
        why = listing.note if listing is not None and listing.note else "no checkpoint"
        return html('{line}<p class="note">{w}</p>', line=line, w=why)
    rows = join(
        html('<tr class="checkpoint" data-state="{st}"><td>{n}</td><td>{s}</td><td>{t}</td><td>{z}</td><td>{w}</td>'
             '</tr>', st=row.state, n=row.name, s="-" if row.step is None else row.step, t=_stamp(row.time),
             z=size_text(row.size), w=state_text(row))
        for row in listing.rows
    )  # fmt: skip
    return html('{line}<table class="checkpoints"><thead><tr><th>checkpoint</th><th>step</th><th>time</th>'
                '<th>size</th><th>state</th></tr></thead><tbody>{rows}</tbody></table>'
                '<p class="source">in {where}</p>', line=line, rows=rows, where=listing.where)  # fmt: skip


def events_part(events: Sequence[JobEvent], error: str = "") -> Markup:
    """The job's events, oldest first (or why they cannot be read)."""
    if error:
        return html('<div class="error">{e}</div>', e=error)
    rows = join(
        html('<tr class="level-{lv}"><td>{t}</td><td>{s}</td><td>{r}</td><td>{l}</td><td>{m}</td></tr>',
             lv=event.level.lower(), t=_stamp(event.time), s=event.source, r=event.reason, l=event.level,
             m=event.message)
        for event in events
    )  # fmt: skip
    return html('<table class="events"><thead><tr><th>time</th><th>source</th><th>reason</th><th>level</th>'
                '<th>message</th></tr></thead><tbody>{rows}</tbody></table>', rows=rows)  # fmt: skip


def usage_part(samples: Sequence[Sample], note: str) -> Markup:
    """CPU, memory and accelerators of each host over time, from the samples taken while the page was open."""
    hosts = sorted({(usage.host, usage.name) for sample in samples for usage in sample.report.hosts})
    cpu: List[Series] = []
    memory: List[Series] = []
    for index, _ in hosts:
        label = f"host {index}"
        rows = [(s.time, u) for s in samples for u in s.report.hosts if u.host == index]
        cores = [(when, u.cpu_cores) for when, u in rows if u.cpu_cores is not None]
        percent = [(when, u.cpu_percent) for when, u in rows if u.cpu_percent is not None]
        cpu.append(Series(label, [(w, float(v)) for w, v in (cores or percent)]))
        mem = [(when, u.memory_bytes / (1 << 20)) for when, u in rows if u.memory_bytes is not None]
        shares = [(when, float(u.memory_percent)) for when, u in rows if u.memory_percent is not None]
        memory.append(Series(label, mem or shares))
    figures = [(s.time, dict(u.accelerators)) for s in samples for u in s.report.hosts if u.accelerators]
    charts = [line_chart("CPU (cores)", "", cpu), line_chart("memory (MB)", "", memory)]
    if figures:
        charts.append(line_chart("accelerators", "", accelerator_series(figures)))
    source = samples[-1].report.source if samples else ""
    said = html('<p class="note">{n}</p>', n=note) if note else Markup("")
    where = html('<p class="source">from {s}, every 2 s while this page is open</p>', s=source) if source \
        else Markup("")
    return html("{said}{charts}{where}", said=said, charts=join(charts), where=where)


def job_page(status: JobStatus, backend: str, parts: Mapping[str, Markup], logs: Sequence[str],
             report: str, actions_shown: Sequence[str]) -> Markup:  # fmt: skip
    """A job: summary and hosts, attempts, progress and checkpoints, logs (following, with a search), events,
    usage, root cause and report."""
    key = {"b": backend, "id": status.id}
    actions = join(html('<a class="button" id="{a}" href="{h}">{t}</a>', h=link("/confirm", action=action, **key),
                        a=action, t=action.capitalize()) for action in actions_shown)  # fmt: skip
    options = join(html('<option value="{v}">{l}</option>', v=path, l=path or "all hosts, merged") for path in logs)

    def part(name: str) -> Markup:
        return html('<div id="{n}" data-part="{src}">{body}</div>', n=name, src=link("/part", name=name, **key),
                    body=parts[name])  # fmt: skip

    body = html(
        '<h1>{id}</h1><p class="actions">{actions}</p>'
        '<section><h2>State and hosts</h2>{summary}</section>'
        '<section><h2>Attempts</h2>{timeline}</section>'
        '<section><h2>Progress and checkpoints</h2>{progress}</section>'
        '<section><h2>Logs</h2><div class="logbar"><label>file <select id="logfile">{options}</select></label> '
        '<label>search <input id="logsearch" type="search" placeholder="text in a line"></label> '
        '<label><input id="follow" type="checkbox" checked> follow</label></div>'
        '<pre id="log" data-src="{logsrc}"></pre></section>'
        '<section><h2>Events</h2>{events}</section>'
        '<section><h2>Usage</h2>{usage}</section>'
        '<section><h2>Root cause and report</h2><pre class="report">{report}</pre></section>',
        id=status.id, actions=actions, summary=part("summary"), timeline=part("timeline"), options=options,
        progress=part("progress"),
        logsrc=link("/log", **key), events=part("events"), usage=part("usage"), report=report,
    )  # fmt: skip
    return layout(status.id, body, live=not status.is_terminal)


def confirm_page(action: str, backend: str, job_id: str, csrf: str) -> Markup:
    """Are you sure? A form that POSTs the action with the page's CSRF value, and a way back."""
    body = html(
        '<h1>{title} {id}?</h1><p>{meaning}</p><form method="post" action="/action">'
        '<input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="action" value="{action}">'
        '<input type="hidden" name="b" value="{b}"><input type="hidden" name="id" value="{id}">'
        '<button type="submit" id="confirm">{title}</button> <a href="{back}">cancel</a></form>',
        title=action.capitalize(), id=job_id, meaning=_MEANING[action].format(id=job_id), csrf=csrf, action=action,
        b=backend, back=link("/job", b=backend, id=job_id),
    )  # fmt: skip
    return layout(f"{action} {job_id}", body)


def action_page(said: str, error: bool, back: str) -> Markup:
    """What an action said: the CLI's line, or its error line."""
    kind = "error" if error else "done"
    text = f"ma-submit: error: {said}" if error else said
    return layout(said, html('<p class="{k}" id="said">{t}</p><p><a href="{b}">back</a></p>', k=kind, t=text, b=back))


def sweeps_page(records: Sequence[Mapping[str, object]], now: float) -> Markup:
    """Every sweep under the home, newest first."""
    rows = join(
        html('<tr><td><a href="{h}">{id}</a></td><td>{n}</td><td>{t}</td><td>{age}</td><td>{e}</td></tr>',
             h=link("/sweep", id=record.get("id")), id=record.get("id"), n=record.get("name") or "-",
             t=len(record.get("trials") or []),  # type: ignore[arg-type]
             age=format_age(now - float(record.get("created_at") or now)),  # type: ignore[arg-type]
             e=record.get("error") or "")
        for record in records
    )  # fmt: skip
    table = html('<table class="sweeps"><thead><tr><th>sweep</th><th>name</th><th>trials</th><th>age</th><th></th>'
                 '</tr></thead><tbody>{rows}</tbody></table>', rows=rows) if records \
        else html('<p class="empty">no sweeps</p>')  # fmt: skip
    return layout("Sweeps", html("<h1>Sweeps</h1>{t}", t=table))


def sweep_page(sweep_id: str, backend: str, results: Sequence[TrialResult], metric: Mapping[str, object],
               now: float) -> Markup:  # fmt: skip
    """A sweep's results, best first, and its objective per trial as a plot."""
    name = str(metric.get("name") or "objective")
    goal = metric.get("goal") if isinstance(metric.get("goal"), str) else None
    rows = join(
        html('<tr><td>{r}</td><td>{i}</td><td>{p}</td><td>{s}</td><td>{m}</td><td>{c}</td><td>{d}</td><td>{j}</td></tr>',
             r=rank + 1, i=row.index, p=row.params_text(), s=_state(row.state),
             m="-" if row.metric is None else f"{row.metric:.6g}", c=_code(row.exit_code), d=format_age(row.duration),
             j=html('<a href="{h}">{id}</a>', h=link("/job", b=backend, id=row.job_id), id=row.job_id)
             if row.job_id else "-")
        for rank, row in enumerate(results)
    )  # fmt: skip
    plot = scatter(f"{name} per trial ({goal or 'no goal'})",
                   [(row.index, row.metric, row.params_text()) for row in results],
                   str(goal) if goal else None)  # fmt: skip
    body = html('<h1>Sweep {id}</h1>{plot}<table class="results"><thead><tr><th>rank</th><th>trial</th><th>params</th>'
                '<th>state</th><th>{name}</th><th>exit code</th><th>took</th><th>job</th></tr></thead><tbody>{rows}'
                '</tbody></table>', id=sweep_id, plot=plot, name=name, rows=rows)  # fmt: skip
    return layout(f"sweep {sweep_id}", body)


def report_text(status: JobStatus, line: Timeline) -> str:
    """What the job's end says: the root cause, the failure class, each host's last word and every restart's cause
    (shown escaped in a ``<pre>``)."""
    said: List[str] = []
    last = line.attempts[-1] if line.attempts else None
    if last is not None and last.cause:
        said.append(f"root cause: {last.cause}")
    if status.failure_class:
        failure = status.failure_class
        retry = "retryable" if failure.get("retryable") else "not retryable"
        said.append(f"failure class: {failure.get('class')} ({retry}): {failure.get('reason') or ''} "
                    f"{failure.get('description') or ''}".rstrip())  # fmt: skip
    if status.message:
        said.append(f"message: {status.message}")
    said.extend(f"host {host.index} ({host.address}): {host.state.value}, exit code {_code(host.exit_code)}"
                + (f"; {host.detail}" if host.detail else "") for host in status.hosts)  # fmt: skip
    said.extend(f"attempt {attempt.number} ({attempt.outcome}): {attempt.cause}" for attempt in line.attempts[:-1])
    if not status.is_terminal:
        said.insert(0, "the job has not ended yet")
    return "\n".join(said)
