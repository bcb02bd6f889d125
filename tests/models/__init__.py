"""Small module shapes used by the lead's unit tests (snapshot, inventory, explain, CLI).

The broad corpus that is compared with torch lives in ``tests/corpus``.
"""
