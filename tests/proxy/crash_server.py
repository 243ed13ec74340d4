"""A proxy in its own process, for the crash test: two quick replies, then a turn that never
finishes sampling. Usage: crash_server.py CAPTURE_DIR INFO_FILE (INFO_FILE gets url and key)."""

import asyncio
import json
import sys
from pathlib import Path

from tbconsole.common import offline

offline.apply_embedded_defaults()

from tinker_cookbook.renderers import get_renderer  # noqa: E402

from tbconsole.proxy import CaptureProxy  # noqa: E402
from tbconsole.proxy.scripted import Scripted, ScriptedSampler  # noqa: E402
from tbconsole.proxy.tokenizer import qwen35_tokenizer  # noqa: E402


async def main(capture_dir: str, info_file: str) -> None:
    renderer = get_renderer("qwen3_5", qwen35_tokenizer())
    sampler = ScriptedSampler(renderer)
    sampler.add({"role": "assistant", "content": "first"})
    sampler.add({"role": "assistant", "content": "second"})
    sampler.add(Scripted(gate=asyncio.Event()))  # never set: the third turn is in flight forever
    proxy = CaptureProxy(renderer=renderer, sampler=sampler, default_max_tokens=64, capture_dir=capture_dir)
    await proxy.start()
    cred = proxy.register_trial("crash")
    tmp = Path(info_file + ".tmp")
    tmp.write_text(json.dumps({"url": cred.openai_base_url, "key": cred.api_key}))
    tmp.rename(info_file)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
