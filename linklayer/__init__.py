"""The link layer: a per-packet CRC, sequence numbers and go-back-N replay between a GPU's
DMA engine and its link, so that every packet the DMA hands over arrives once, intact and in
order whatever the wire does to its beats (``docs/linklayer.md``)."""
