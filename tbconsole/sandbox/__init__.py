"""The local sandbox: Harbor trials on this machine, with no Docker and no network.

``tbconsole.sandbox:LocalSandbox`` is the Harbor import path. The Harbor adapter is imported
lazily so the namespace core stays usable (and cheap to import) without Harbor.
"""

IMPORT_PATH = "tbconsole.sandbox:LocalSandbox"


def __getattr__(name: str):
    if name == "LocalSandbox":
        from tbconsole.sandbox.environment import LocalSandbox

        return LocalSandbox
    raise AttributeError(name)
