"The body of a fixture that serves a model: shared by the llama.cpp server fixtures."
import pytest


def serving(server):
    "Start `server` (a failed start fails the test), yield `(base_url, model)`, then stop it."
    try: server.start()
    except RuntimeError as e: pytest.fail(str(e), pytrace=False)
    try: yield server.base_url, server.model
    finally: server.stop()
