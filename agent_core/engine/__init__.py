"""The durable core: statuses, named SQL, leases, the journal, a run's and a call's
transitions, decisions, the frames a step writes, and who may see a run. It imports nothing
from the other sub-packages."""
