"""Importing the worlds people already have (docs/worlds.md, "Import"): character cards V1/V2/V3 (PNG with a
`chara` / `ccv3` text chunk, JSON, CHARX zip) and standalone lorebooks (lorebook_v3, SillyTavern World Info)
become world packages the registry serves; a world goes back out as a V3 card (PNG or CHARX)."""
