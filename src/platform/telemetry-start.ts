import { startTracing } from "./telemetry.ts";

// Imported first by src/main.ts: the SDK starts (when the OTEL_* variables ask for it) before the service's
// modules load the libraries it instruments.
startTracing();
