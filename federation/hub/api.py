"""The hub API: our resources, annotations, labels and finalizer, named once."""

from __future__ import annotations

from pathlib import Path

from federation.contexts.client import Resource

POLICY_GROUP = "policy.federation.io"
CLUSTER_GROUP = "cluster.federation.io"
WORK_GROUP = "work.federation.io"
VERSION = "v1alpha1"

PROPAGATION_POLICIES = Resource(POLICY_GROUP, VERSION, "propagationpolicies", "PropagationPolicy")
CLUSTER_PROPAGATION_POLICIES = Resource(POLICY_GROUP, VERSION, "clusterpropagationpolicies",
                                        "ClusterPropagationPolicy", namespaced=False)
OVERRIDE_POLICIES = Resource(POLICY_GROUP, VERSION, "overridepolicies", "OverridePolicy")
CLUSTER_OVERRIDE_POLICIES = Resource(POLICY_GROUP, VERSION, "clusteroverridepolicies",
                                     "ClusterOverridePolicy", namespaced=False)
KARMADA_POLICY_GROUP = "policy.karmada.io"
KARMADA_PROPAGATION_POLICIES = Resource(KARMADA_POLICY_GROUP, VERSION, "propagationpolicies",
                                        "PropagationPolicy")
KARMADA_CLUSTER_PROPAGATION_POLICIES = Resource(
    KARMADA_POLICY_GROUP, VERSION, "clusterpropagationpolicies", "ClusterPropagationPolicy",
    namespaced=False)
KARMADA_OVERRIDE_POLICIES = Resource(KARMADA_POLICY_GROUP, VERSION, "overridepolicies",
                                     "OverridePolicy")
KARMADA_CLUSTER_OVERRIDE_POLICIES = Resource(KARMADA_POLICY_GROUP, VERSION,
                                             "clusteroverridepolicies", "ClusterOverridePolicy",
                                             namespaced=False)
PROPAGATION_POLICY_RESOURCES = (PROPAGATION_POLICIES, CLUSTER_PROPAGATION_POLICIES,
                                KARMADA_PROPAGATION_POLICIES,
                                KARMADA_CLUSTER_PROPAGATION_POLICIES)
"""Every propagation policy kind the controllers read, ours and Karmada's (treated the same)."""
OVERRIDE_POLICY_RESOURCES = (OVERRIDE_POLICIES, CLUSTER_OVERRIDE_POLICIES,
                             KARMADA_OVERRIDE_POLICIES, KARMADA_CLUSTER_OVERRIDE_POLICIES)
"""Every override policy kind, ours and Karmada's."""
POLICY_RESOURCES = (*PROPAGATION_POLICY_RESOURCES, *OVERRIDE_POLICY_RESOURCES)
MEMBER_CLUSTERS = Resource(CLUSTER_GROUP, VERSION, "memberclusters", "MemberCluster",
                           namespaced=False)
RESOURCE_BINDINGS = Resource(WORK_GROUP, VERSION, "resourcebindings", "ResourceBinding")
CLUSTER_RESOURCE_BINDINGS = Resource(WORK_GROUP, VERSION, "clusterresourcebindings",
                                     "ClusterResourceBinding", namespaced=False)
OAM_GROUP = "core.oam.dev"
APPLICATIONS = Resource(OAM_GROUP, "v1beta1", "applications", "Application")
APPLICATION_REVISIONS = Resource(OAM_GROUP, "v1beta1", "applicationrevisions",
                                 "ApplicationRevision")
RESOURCE_TRACKERS = Resource(OAM_GROUP, "v1beta1", "resourcetrackers", "ResourceTracker")
OAM_POLICIES = Resource(OAM_GROUP, "v1alpha1", "policies", "Policy")
OAM_WORKFLOWS = Resource(OAM_GROUP, "v1alpha1", "workflows", "Workflow")
"""KubeVela's external Workflow: an Application's ``spec.workflow.ref`` names one of its
namespace (:mod:`federation.applications.workflow_ref`)."""
COMPONENT_DEFINITIONS = Resource(OAM_GROUP, "v1beta1", "componentdefinitions",
                                 "ComponentDefinition")
TRAIT_DEFINITIONS = Resource(OAM_GROUP, "v1beta1", "traitdefinitions", "TraitDefinition")
POLICY_DEFINITIONS = Resource(OAM_GROUP, "v1beta1", "policydefinitions", "PolicyDefinition")
WORKFLOW_STEP_DEFINITIONS = Resource(OAM_GROUP, "v1beta1", "workflowstepdefinitions",
                                     "WorkflowStepDefinition")
DEFINITIONS = (COMPONENT_DEFINITIONS, TRAIT_DEFINITIONS, POLICY_DEFINITIONS,
               WORKFLOW_STEP_DEFINITIONS)
"""KubeVela's definition kinds (administrators write them in the system namespaces)."""
DEFINITION_REVISIONS = Resource(OAM_GROUP, "v1beta1", "definitionrevisions", "DefinitionRevision")
"""Each distinct spec of a definition, written by the definition controller beside it
(``type: name@vN`` renders with one)."""
EVENTS = Resource("", "v1", "events", "Event")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass",
                            namespaced=False)
"""Kubernetes PriorityClasses on the hub: a policy's ``schedulePriority`` names one (Karmada's
``KubePriorityClass`` source) and its ``value`` orders scheduling."""
WORKLOAD_REBALANCERS = Resource("apps.karmada.io", "v1alpha1", "workloadrebalancers",
                                "WorkloadRebalancer", namespaced=False)
"""Karmada's WorkloadRebalancer (cluster-scoped): a fresh re-division of the workloads it
lists (:mod:`federation.hub.rebalancers`)."""
INTERPRETER_CUSTOMIZATIONS = Resource("config.karmada.io", "v1alpha1",
                                      "resourceinterpretercustomizations",
                                      "ResourceInterpreterCustomization", namespaced=False)
"""Karmada's resource interpreter customizations (cluster-scoped, admin-written)."""
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                "CustomResourceDefinition", namespaced=False)

FINALIZER = "federation.io/propagation"
"""Legacy: the finalizer earlier versions put on templates (the binding is the record now;
propagation removes it, once, from a template that has it)."""
REPLICAS_ANNOTATION = "federation.io/replicas"
"""Legacy: the decision earlier versions kept on templates (now the binding's spec)."""
POLICY_ANNOTATION = "federation.io/policy"
"""Legacy: the placing policy earlier versions kept on templates (now the binding's spec)."""
PENDING_CLEANUP_ANNOTATION = "federation.io/pending-cleanup"
"""Legacy: pending clean-up earlier versions kept on templates (now the binding's spec)."""
PLACEMENT_ANNOTATION = "federation.io/placement"
"""Legacy: the chosen clusters earlier versions kept on templates for a routed write (now
the binding's spec; writes name their cluster)."""
ORPHAN_ANNOTATION = "federation.io/orphan"
"""On templates: ``"true"`` keeps member copies when the template is deleted."""
BINDING_LABEL = "federation.io/template-kind"

CRD_FILE = Path(__file__).resolve().parent.parent / "crds" / "crds.yaml"
KARMADA_CRD_FILE = CRD_FILE.with_name("karmada.yaml")
"""Karmada's policy kinds (generated by :mod:`federation.hub.karmada_crds`)."""
INTERPRETER_CRD_FILE = CRD_FILE.with_name("interpreter.yaml")
"""Karmada's ResourceInterpreterCustomization (docs/interpreter.md)."""
REBALANCER_CRD_FILE = CRD_FILE.with_name("rebalancer.yaml")
"""Karmada's WorkloadRebalancer (docs/placement.md, "Fresh re-division")."""
CRD_FILES = (CRD_FILE, KARMADA_CRD_FILE, INTERPRETER_CRD_FILE, REBALANCER_CRD_FILE)
