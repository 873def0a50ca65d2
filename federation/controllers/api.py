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
EVENTS = Resource("", "v1", "events", "Event")
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
ORPHAN_ANNOTATION = "federation.io/orphan"
"""On templates: ``"true"`` keeps member copies when the template is deleted."""
BINDING_LABEL = "federation.io/template-kind"

CRD_FILE = Path(__file__).resolve().parent.parent / "crds" / "crds.yaml"
