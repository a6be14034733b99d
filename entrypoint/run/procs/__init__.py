"""The run's processes and their ownership: ``/proc`` and proof (:mod:`.proctree`), the job's token and kill
loops (:mod:`.reaper`), process groups signalled only while proven the job's (:mod:`.pgroups`), the cgroup
(:mod:`.cgroup`), the watchdog program (:mod:`.watchdog`), the guards that
keep them from outliving a run (:mod:`.guards`), the processes one run started (:mod:`.processes`), a
launcher's workers seen from ``/proc`` (:mod:`.watch`) and this process's own settings (:mod:`.selfproc`).

Never imports :mod:`..output` (nor does it import this room): ownership and output are two rooms.
Kept empty: the watchdog program imports this package before :mod:`.watchdog`.
"""

__all__: list[str] = []
