"""The bottom layer: datasets as normalised graphs (``graphs.datasets``) and graph helpers
(``graphs.ops``). Every other package (targets, canaries, attacks, audit) may import it."""
