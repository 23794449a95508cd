# The two commands of the README: `make up` runs the service, `make test` passes every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE := node
TSX := node --import tsx

.PHONY: help deps build proto proto-check typecheck up start down test test-unit test-integration bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

deps: ## Install npm packages and Debian chromium, nats-server, ffmpeg when missing
	@scripts/install.sh

build: deps ## Compile TypeScript to dist/, build the TypeScript SDK and the dashboard
	@npx tsc -p tsconfig.json
	@npm run build --silent -w clients/typescript
	@npm run build --silent -w dashboard

typecheck: deps
	@npx tsc -p tsconfig.json --noEmit

proto: deps ## Regenerate gen/ from proto/
	@npx buf lint
	@npx buf generate

proto-check: deps ## Fail when gen/ is stale against proto/
	@npx buf lint
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && npx buf generate -o "$$tmp" && \
	  if diff -r gen "$$tmp/gen" >/dev/null; then echo "proto-check: gen/ is up to date"; \
	  else diff -r gen "$$tmp/gen" | head -20; echo "proto-check: gen/ is stale; run make proto and commit" >&2; exit 1; fi

up: build ## Run every service locally; prints the API URL and a key (Ctrl-C stops)
	@$(NODE) dist/scripts/up.js

start: build ## Like up, in the background (logs in data/up.log); stop with make down
	@$(NODE) dist/scripts/up.js --detach

down: ## Stop a background make start
	@$(NODE) dist/scripts/up.js down 2>/dev/null || $(TSX) scripts/up.ts down

test: deps proto-check build ## Unit tests, integration tests, proto check and the build
	@$(TSX) scripts/test.ts

test-unit: deps
	@$(TSX) scripts/test.ts unit

test-integration: deps
	@$(TSX) scripts/test.ts integration

bench: build ## Benchmarks (figures are ratios against a baseline in the same run)
	@$(TSX) bench/run.ts

clean:
	rm -rf dist
