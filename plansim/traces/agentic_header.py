"""The agentic Mooncake header's identity: its schema name and version. Detection sniffs it
(``plansim.traces.formats.agentic_mooncake``), the reader checks it
(``plansim.traces.agentic_mooncake``) and the writer writes it (``plansim.traces.writers``)."""

SCHEMA = "dynamo.agentic_mooncake"
VERSION = 2
