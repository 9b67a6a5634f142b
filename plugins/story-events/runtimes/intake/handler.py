"""Import the world's declared events into the catalogue: normalised, validated, rebuilt only when they change."""

from ...lib import events as lib


async def handler(ctx):
    declared = await ctx.plugin_data.list("_hidden.events")
    public = await ctx.plugin_data.list("events")
    if public:
        # A world that sent its events as public data showed them to everyone: they are not used.
        raise ValueError(f"{len(public)} event(s) arrived as public data (namespace events); a world declares its events "
                         "in a data source with visibility: hidden, so nothing of them shows before they fire")
    dimensions = sorted((ctx.world.dimensions or {}).keys()) if ctx.world is not None else []
    stamp = lib.fingerprint(declared, dimensions)
    status = await ctx.plugin_data.get("_hidden.intake", "status") or {}
    if status.get("fingerprint") == stamp:
        return {"events": len(status.get("valid") or []), "invalid": len(status.get("invalid") or []), "rebuilt": False}
    catalogue, invalid = {}, []
    for key in sorted(declared):
        try:
            catalogue[key] = lib.normalise_event(key, declared[key], dimensions=dimensions, events=list(declared))
        except lib.EventError as error:
            invalid.append({"id": error.event_id, "field": error.where, "problem": error.problem})
    # An event that a valid one's `fired` condition names but that is itself invalid never fires: that is fine.
    for key in sorted(set(await ctx.plugin_data.list("_hidden.catalog")) - set(catalogue)):
        await ctx.plugin_data.delete("_hidden.catalog", key)
    for key, event in catalogue.items():
        await ctx.plugin_data.set("_hidden.catalog", key, event)
    await ctx.plugin_data.set("_hidden.intake", "status", {"fingerprint": stamp, "valid": sorted(catalogue), "invalid": invalid})
    return {"events": len(catalogue), "invalid": len(invalid), "rebuilt": True}
