"""What the runtimes and the turn share: turn state, runtime outcomes, inputs, story output, player
effects, plugin-data views, kernel tools and the tool-call hooks both runtime kinds run through."""
