"""Conversations as durable Temporal workflows (the optional ``temporal`` extra).

A main conversation is one workflow (:mod:`retinue.temporal.workflow`), its id made of the
tenant and the conversation id; an Update ``send`` runs one turn. The workflow holds the
history as Retinue's message JSON and decides each next step deterministically; every model
call and every tool call is an activity (:mod:`retinue.temporal.activities`) run by
``retinue worker --temporal ADDRESS`` on the runtime built from the settings
(:mod:`retinue.temporal.worker`). Activities run at least once: each gets an idempotency key
(workflow id, step, call id), and a call of a tool that is not ``idempotent`` whose worker
died while it ran is reported to the model as cut short, not run twice. A long conversation
continues as new before Temporal's history limits. Each sub-agent session (interactive or
one-shot) is a child workflow of the same class, nested as the session tree nests; approvals
and the main agent's questions wait in the workflow for a person, answered through the
conversation's workflow, whose queries show the whole tree. :mod:`retinue.temporal.client` starts,
continues and reads conversations. Nothing here is imported by the rest of Retinue.
"""
