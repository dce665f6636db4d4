"""Spend: the cost of a request at the config's prices, the spending ledger and its caps.

Reads the price table of the config (`experiment.prices`), writes
``results/<experiment>/spend/ledger.jsonl`` (every priced request, with running totals) and each
run's ``spend.jsonl``. Used by the agent session, the agent proxy and the ``mllm`` server, which
check the caps before each request; the live `status` (in `report`) reads the ledger.
"""
