"""Common base: errors, atomic writes, artifacts and contracts, config records, the rule engine, resources, subprocesses, markdown and SVG helpers. Imports nothing from the stages."""
