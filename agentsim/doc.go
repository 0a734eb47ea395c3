// Package agentsim simulates game agents for the demo and for load tests: every tick, each
// agent samples the online count of its share of a service tree's leaves and submits it through
// the agent client (api/agentclient), exactly as a real agent does — jittered start, one
// submission id per submission, retries that are safe by construction.
//
// Counts follow a deterministic daily curve with per-leaf noise, so a run is reproducible from
// its seed. It does not write to the store directly.
package agentsim
