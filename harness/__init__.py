"""The test harness: what runs the program and its tools without the cloud, for the tests, the labs and the offline
render (tools/render.py): the mock engine, its model of Google Cloud and of GKE's network, and the stand-ins and
benches of the labs. An operator runs tools/; only tools/render.py imports this (tests/test_imports.py holds it)."""
