"""The kinds of tool call beyond the plain gated one: recording a model step's proposals,
independent proposals, delegation to a child run, confirmed calls (SPEC §14, §17)."""
