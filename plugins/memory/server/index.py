"""memory's entry: memory blocks (lib/blocks.py).

- memory.block-definitions@1 (a read service): the plugin's default block definitions, {blocks: [...]}.
- prompt.segment@1/blocks: the session's blocks in the system prompt of story runtimes and of this
  plugin's own runtimes (the blocks with a value), and of agents that import memory.block-edit@1
  (every block, and how to edit them).
- memory.block-edit@1 (a model-facing write service, the tool memory-block-edit): append to or replace
  within an editable block, refused past its limit; the value commits with the calling run.
"""

from shared.plugin_sdk import ToolError

from ..lib.blocks import NAMESPACE, BlockError, default_definitions, edit, render, session_blocks

EDIT_SERVICE = "memory.block-edit@1"


def register(covel):
    covel.register_service("memory.block-definitions@1", block_definitions)
    covel.register_service(EDIT_SERVICE, edit_block, model_facing=True, access="write")
    covel.provide_extension("prompt.segment@1", "blocks", blocks_segment)


def block_definitions(ctx, args):
    return {"blocks": default_definitions(ctx.locale)}


def blocks_segment(ctx, request):
    request = request if isinstance(request, dict) else {}
    records = ((request.get("data") or {}).get(NAMESPACE)) or {}
    locale = request.get("locale") or ctx.locale
    blocks = session_blocks(records, locale)
    # An agent that may edit sees every block and how to edit; any other reader only the blocks with a value.
    editing = EDIT_SERVICE in (request.get("services") or [])
    shown = blocks if editing else [block for block in blocks if block["value"]]
    if not shown:
        return None
    return {"id": "blocks", "content": render(shown, locale, editing), "position": "system"}


def edit_block(ctx, args):
    blocks = session_blocks(ctx.list_plugin_data(NAMESPACE), ctx.locale)
    try:
        block = edit(blocks, args)
    except BlockError as error:
        raise ToolError(error.code, error.message, error.hint) from None
    ctx.set_plugin_data(NAMESPACE, block["label"], block)
    return {"label": block["label"], "chars": len(block["value"]), "limit": block["limit"], "value": block["value"]}
