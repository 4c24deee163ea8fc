"""filejobs' dev tools: the local stack on moto server (`filejobs dev`), the template's parser,
and the chaos, soak, cost and capacity tooling. Never shipped to Lambda."""
