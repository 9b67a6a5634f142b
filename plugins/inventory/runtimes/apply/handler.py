"""Apply inventory.changes@1 to the items dataset: all of them, or (on a bad change) none."""

from ...lib import items


async def handler(ctx):
    applied = []
    for change in ctx.inputs["changes"]["value"]:
        name, delta = change["item"].strip(), int(change["delta"])
        key = items.item_key(name)
        current = await ctx.plugin_data.get("items", key)
        have = current["quantity"] if current else 0
        if have + delta < 0:
            raise ValueError(f"cannot take {-delta} x {name!r}: the player carries {have}")
        if current is None and delta > 0:
            await ctx.plugin_data.set("items", key, {"id": key, "name": name, "quantity": delta, "equipped": bool(change.get("equip"))})
        elif current is not None and have + delta == 0:
            await ctx.plugin_data.delete("items", key)
        elif current is not None:
            operations = [{"op": "inc", "path": "/quantity", "by": delta}] if delta else []
            if "equip" in change:
                operations.append({"op": "merge", "path": "", "value": {"equipped": bool(change["equip"])}})
            if operations:
                await ctx.plugin_data.update("items", key, operations)
        else:
            continue  # nothing carried and nothing gained: a no-op change
        applied.append({"item": key, "name": current["name"] if current else name, "delta": delta, "quantity": have + delta})
    return {"applied": applied}
