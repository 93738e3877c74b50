"""DMA engine: trigger queue, command table, address generator, link packets (issue: dma/)."""
