"""A straight Python port of Karmada's replica division, the reference for property tests.

Ported by reading karmada-io/karmada at commit f8fdd02df376 (2026-08-21); each section
names the Go file and each function the Go function it ports, in the same order and with
the same variable names, so that a reviewer can read the two side by side. Nothing here
is shared with :mod:`federation.placement`: the engine and this port are independent
implementations of the same behaviour, and the tests compare them.

This port was itself checked once against Karmada's Go code: the functions it ports,
extracted from that commit into a scratch program (with Go 1.19, and this port using Go
1.19's sort constants to match), gave the same division on 13,000 random cases from the
strategies in test_karmada_division.py, 5,000 of them over 13 to 40 clusters. That program
is Karmada's code, so it is not kept here.

What is modelled: every candidate cluster passed the filters (ready, affinity, taints are
out of scope here), the only scheduler plugins that score are Karmada's defaults
(ClusterLocality: 100 for a cluster in the binding's ``spec.clusters``, ClusterAffinity:
0), there is one estimator whose answer per cluster is given (None = the estimator has no
answer, ``UnauthenticReplica``), no spread constraints, no overflow affinities; ``assignmentMode``
Steady, or Fresh with ``fresh=True`` (``rescheduleTriggeredAt`` later than the last
schedule: ``dynamicFreshScale``, ported from Karmada's division_algorithm.go, read not
copied). Static weights target clusters by name.

Go's ``sort.Sort`` is not stable; for 12 elements or fewer it is an insertion sort, which
is, and :func:`sort_sort` ports it. Beyond 12 it is pdqsort, whose order among equal
elements matters to Aggregated; that one port is shared with the engine
(:mod:`federation.placement.gosort`) and checked against Go's output on its own.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from federation.placement import gosort

MAX_INT32 = 2**31 - 1
MAX_CLUSTER_SCORE = 100  # pkg/scheduler/framework: MaxClusterScore
MIN_CLUSTER_SCORE = 0


def int32(value: int) -> int:
    """Go's int32 arithmetic wraps around; Python's ints do not."""
    return (value + 2**31) % 2**32 - 2**31


def fnv32a(data: bytes) -> int:
    """hash/fnv New32a().Write(data).Sum32()."""
    h = 2166136261
    for byte in data:
        h ^= byte
        h = (h * 16777619) & 0xFFFFFFFF
    return h


@dataclass
class TargetCluster:
    """workv1alpha2.TargetCluster."""

    Name: str
    Replicas: int


class Unschedulable(Exception):
    """framework.UnschedulableError."""


# ---------------------------------------------------------------------------------------
# Go's sort.Sort for short slices (sort/zsortinterface.go: insertionSort, used by pdqsort
# when the slice has at most 12 elements).


def sort_sort(
    items: list[TargetCluster], less: Callable[[TargetCluster, TargetCluster], bool]
) -> None:
    """Go's sort.Sort. Up to 12 elements it is this insertion sort (stable); beyond, pdqsort,
    for which the engine's port is used (checked against Go's own output in
    test_gosort.py): porting it twice would not make either more right."""
    if len(items) > 12:
        gosort.sort(items, less)
        return
    for i in range(1, len(items)):
        j = i
        while j > 0 and less(items[j], items[j - 1]):
            items[j], items[j - 1] = items[j - 1], items[j]
            j -= 1


def target_clusters_list_less(a: TargetCluster, b: TargetCluster) -> bool:
    """pkg/scheduler/core/division_algorithm.go: TargetClustersList.Less (replicas descending)."""
    return a.Replicas > b.Replicas


# ---------------------------------------------------------------------------------------
# pkg/util/helper/webstermethod.go


@dataclass
class Party:
    Name: str
    Votes: int
    Seats: int


class _Entry:
    """One heap element, ordered by WebsterPriorityQueue.Less (a strict total order, so the
    sequence of pops does not depend on the heap's internal layout: heapq stands in for
    container/heap)."""

    def __init__(self, party: Party, tie_breaker: Callable[[Party, Party], bool] | None) -> None:
        self.party = party
        self.tie_breaker = tie_breaker

    def __lt__(self, other: _Entry) -> bool:
        return webster_less(self.party, other.party, self.tie_breaker)


def webster_less(i: Party, j: Party, tie_breaker: Callable[[Party, Party], bool] | None) -> bool:
    """WebsterPriorityQueue.Less: float64(Votes) / float64(2*Seats+1), int32 denominator."""
    i_priority = float(i.Votes) / float(int32(2 * i.Seats + 1))
    j_priority = float(j.Votes) / float(int32(2 * j.Seats + 1))
    if i_priority == j_priority:
        if tie_breaker is not None:
            return tie_breaker(i, j)
        if i.Seats != j.Seats:
            return i.Seats < j.Seats
        return i.Name < j.Name
    return i_priority > j_priority


def AllocateWebsterSeats(
    newSeats: int,
    partyVotes: dict[str, int],
    initialAssignments: dict[str, int],
    tieBreaker: Callable[[Party, Party], bool] | None,
) -> list[Party]:
    partiesMap: dict[str, Party] = {}
    for n, s in initialAssignments.items():
        partiesMap[n] = Party(Name=n, Votes=0, Seats=s)
    for n, v in partyVotes.items():
        if n in partiesMap:
            partiesMap[n].Votes = v
        else:
            partiesMap[n] = Party(Name=n, Votes=v, Seats=0)
    pq = [_Entry(p, tieBreaker) for p in partiesMap.values()]
    if not pq:
        return []
    heapq.heapify(pq)
    remaining = newSeats
    while remaining > 0:
        nextParty = heapq.heappop(pq).party
        nextParty = replace(nextParty, Seats=nextParty.Seats + 1)
        heapq.heappush(pq, _Entry(nextParty, tieBreaker))
        remaining -= 1
    parties = [entry.party for entry in pq]
    parties.sort(key=lambda p: p.Name)
    return parties


# ---------------------------------------------------------------------------------------
# pkg/util/helper/binding.go


@dataclass
class ClusterWeightInfo:
    ClusterName: str
    Weight: int
    LastReplicas: int = 0


def GetWeightSum(w: Sequence[ClusterWeightInfo]) -> int:
    return sum(info.Weight for info in w)


@dataclass
class Dispenser:
    NumReplicas: int
    Result: list[TargetCluster] = field(default_factory=list)
    TieBreaker: Callable[[Party, Party], bool] | None = None

    def Done(self) -> bool:
        return self.NumReplicas == 0 and len(self.Result) != 0

    def AllocateByWeight(self, w: Sequence[ClusterWeightInfo]) -> None:
        if self.Done():
            return
        if GetWeightSum(w) == 0:
            return
        initialAssignments = {c.Name: c.Replicas for c in self.Result}
        partyVotes = {info.ClusterName: info.Weight for info in w}
        self.Result = convertPartiesToTargetClusters(
            AllocateWebsterSeats(self.NumReplicas, partyVotes, initialAssignments, self.TieBreaker)
        )
        self.NumReplicas = 0


def NewDispenser(numReplicas: int, init: Sequence[TargetCluster] | None, uuid: str) -> Dispenser:
    cp = [replace(c) for c in init or []]
    return Dispenser(NumReplicas=numReplicas, Result=cp, TieBreaker=tieBreakerByUID(uuid))


def tieBreakerByUID(uid: str) -> Callable[[Party, Party], bool]:
    def sortNameDescending(a: Party, b: Party) -> bool:
        if a.Seats != b.Seats:
            return a.Seats < b.Seats
        return a.Name > b.Name

    def sortNameAscending(a: Party, b: Party) -> bool:
        if a.Seats != b.Seats:
            return a.Seats < b.Seats
        return a.Name < b.Name

    if len(uid) == 0:
        return sortNameAscending
    if fnv32a(uid.encode()) & 1 == 1:
        return sortNameDescending
    return sortNameAscending


def convertPartiesToTargetClusters(parties: Sequence[Party]) -> list[TargetCluster]:
    return [TargetCluster(Name=p.Name, Replicas=p.Seats) for p in parties]


def GetStaticWeightInfoListByTargetClusters(
    tcs: Sequence[TargetCluster], scheduled: Sequence[TargetCluster]
) -> list[ClusterWeightInfo]:
    weightList = []
    for targetCluster in tcs:
        lastReplicas = 0
        for scheduledCluster in scheduled:
            if targetCluster.Name == scheduledCluster.Name:
                lastReplicas = scheduledCluster.Replicas
                break
        weightList.append(
            ClusterWeightInfo(targetCluster.Name, targetCluster.Replicas, lastReplicas)
        )
    return weightList


def SpreadReplicasByTargetClusters(
    numReplicas: int, tcs: Sequence[TargetCluster], init: Sequence[TargetCluster] | None, uuid: str
) -> list[TargetCluster]:
    weightList = GetStaticWeightInfoListByTargetClusters(tcs, init or [])
    disp = NewDispenser(numReplicas, init, uuid)
    disp.AllocateByWeight(weightList)
    return disp.Result


# ---------------------------------------------------------------------------------------
# pkg/util/binding.go


def MergeTargetClusters(
    oldCluster: list[TargetCluster], newCluster: list[TargetCluster]
) -> list[TargetCluster]:
    if len(oldCluster) == 0:
        return newCluster
    if len(newCluster) == 0:
        return oldCluster
    oldMap = {c.Name: c.Replicas for c in oldCluster}
    for i, cluster in enumerate(newCluster):
        if cluster.Name in oldMap:
            newCluster[i].Replicas = cluster.Replicas + oldMap.pop(cluster.Name)
    for key, value in oldMap.items():  # Go iterates a map here: the order is random
        newCluster.append(TargetCluster(key, value))
    return newCluster


def GetSumOfReplicas(clusters: Sequence[TargetCluster]) -> int:
    return sum(c.Replicas for c in clusters)


# ---------------------------------------------------------------------------------------
# pkg/scheduler/core/spreadconstraint/group_clusters.go and util.go


@dataclass
class ClusterDetailInfo:
    Name: str
    Score: int = 0
    AvailableReplicas: int = 0
    AllocatableReplicas: int = 0


@dataclass
class Spec:
    """The parts of workv1alpha2.ResourceBindingSpec division reads."""

    Replicas: int
    Clusters: list[TargetCluster]
    UID: str

    def TargetContains(self, name: str) -> bool:
        return any(c.Name == name for c in self.Clusters)

    def AssignedReplicasForCluster(self, name: str) -> int:
        for c in self.Clusters:
            if c.Name == name:
                return c.Replicas
        return 0


def calAvailableReplicas(
    estimates: Sequence[tuple[str, int | None]], spec: Spec
) -> list[TargetCluster]:
    """pkg/scheduler/core/util.go: calAvailableReplicas with one estimator whose answer per
    cluster is given (None: no answer)."""
    availableTargetClusters = [TargetCluster(name, MAX_INT32) for name, _ in estimates]
    if spec.Replicas == 0:
        return availableTargetClusters
    # mergeReplicaResults: the minimum over estimators, unauthentic answers skipped
    for i, (_, answer) in enumerate(estimates):
        if answer is not None and availableTargetClusters[i].Replicas > answer:
            availableTargetClusters[i].Replicas = answer
    for c in availableTargetClusters:
        if c.Replicas == MAX_INT32:
            c.Replicas = spec.Replicas
    return availableTargetClusters


def ClusterLocalityScore(spec: Spec, name: str) -> int:
    """pkg/scheduler/framework/plugins/clusterlocality: Score."""
    if len(spec.Clusters) == 0:
        return MIN_CLUSTER_SCORE
    return MAX_CLUSTER_SCORE if spec.TargetContains(name) else MIN_CLUSTER_SCORE


def generateClustersInfo(
    estimates: Sequence[tuple[str, int | None]], spec: Spec
) -> list[ClusterDetailInfo]:
    """GroupClustersInfo.generateClustersInfo, then sortClusters (spreadconstraint/util.go).

    sortClusters uses sort.Slice, which is not stable either, but its comparison ends on the
    name, a total order: any correct sort gives the same slice."""
    clusters = [
        ClusterDetailInfo(Name=name, Score=ClusterLocalityScore(spec, name))
        for name, _ in estimates
    ]
    for i, clustersReplica in enumerate(calAvailableReplicas(estimates, spec)):
        clusters[i].AvailableReplicas = clustersReplica.Replicas
        clusters[i].AvailableReplicas += spec.AssignedReplicasForCluster(clustersReplica.Name)
        clusters[i].AllocatableReplicas = clustersReplica.Replicas
    # OverflowOrder is 0 for every cluster (no overflow affinities)
    clusters.sort(key=lambda c: (-c.Score, -c.AvailableReplicas, c.Name))
    return clusters


# ---------------------------------------------------------------------------------------
# pkg/scheduler/core/assignment.go and division_algorithm.go

DuplicatedStrategy = "Duplicated"
AggregatedStrategy = "Aggregated"
StaticWeightStrategy = "StaticWeight"
DynamicWeightStrategy = "DynamicWeight"


@dataclass
class StaticClusterWeight:
    ClusterNames: frozenset[str]
    Weight: int


@dataclass
class assignState:
    candidates: list[ClusterDetailInfo]
    spec: Spec
    strategyType: str
    staticWeightList: list[StaticClusterWeight] | None = None
    scheduledClusters: list[TargetCluster] = field(default_factory=list)
    assignedReplicas: int = 0
    availableClusters: list[TargetCluster] = field(default_factory=list)
    availableReplicas: int = 0
    targetReplicas: int = 0
    fresh: bool = False

    def buildScheduledClusters(self) -> None:
        candidateClusterSet = {c.Name for c in self.candidates}
        self.scheduledClusters = [c for c in self.spec.Clusters if c.Name in candidateClusterSet]
        self.assignedReplicas = GetSumOfReplicas(self.scheduledClusters)

    def buildAvailableClusters(
        self, c: Callable[[list[ClusterDetailInfo], Spec], list[TargetCluster]]
    ) -> None:
        self.availableClusters = c(self.candidates, self.spec)
        self.availableReplicas = GetSumOfReplicas(self.availableClusters)

    def resortAvailableClusters(self) -> list[TargetCluster]:
        prior = {c.Name for c in self.scheduledClusters if c.Replicas > 0}
        if len(prior) == 0:
            return self.availableClusters
        prev = [c for c in self.availableClusters if c.Name in prior]
        left = [c for c in self.availableClusters if c.Name not in prior]
        self.availableClusters = prev + left
        return self.availableClusters


def getStaticWeightInfoList(
    clusters: Sequence[ClusterDetailInfo],
    weightList: Sequence[StaticClusterWeight],
    lastTargetClusters: Sequence[TargetCluster],
) -> list[ClusterWeightInfo]:
    list_: list[ClusterWeightInfo] = []
    for cluster in clusters:
        weight = 0
        lastReplicas = 0
        for staticWeightRule in weightList:
            if cluster.Name in staticWeightRule.ClusterNames:  # util.ClusterMatches
                weight = max(weight, staticWeightRule.Weight)
        for lastTargetCluster in lastTargetClusters:
            if cluster.Name == lastTargetCluster.Name:
                lastReplicas = lastTargetCluster.Replicas
                break
        if weight > 0:
            list_.append(ClusterWeightInfo(cluster.Name, weight, lastReplicas))
    if GetWeightSum(list_) == 0:
        for cluster in clusters:
            list_.append(ClusterWeightInfo(cluster.Name, 1))
    return list_


def assignByStaticWeightStrategy(state: assignState) -> list[TargetCluster]:
    if state.staticWeightList is None:  # getDefaultWeightPreference: every candidate weighs 1
        state.staticWeightList = [
            StaticClusterWeight(frozenset({c.Name}), 1) for c in state.candidates
        ]
    weightList = getStaticWeightInfoList(
        state.candidates, state.staticWeightList, state.spec.Clusters
    )
    disp = NewDispenser(state.spec.Replicas, None, state.spec.UID)
    disp.AllocateByWeight(weightList)
    return disp.Result


def dynamicDivideReplicas(state: assignState) -> list[TargetCluster]:
    if state.availableReplicas < state.targetReplicas:
        raise Unschedulable(
            f"Clusters available replicas {state.availableReplicas} are not enough to schedule."
        )
    if state.strategyType == AggregatedStrategy:
        state.availableClusters = state.resortAvailableClusters()
        total = 0
        for i in range(len(state.availableClusters)):
            total += state.availableClusters[i].Replicas
            if total >= state.targetReplicas:
                state.availableClusters = state.availableClusters[: i + 1]
                break
    # fallthrough: DynamicWeightStrategy
    return MergeTargetClusters(
        state.scheduledClusters,
        SpreadReplicasByTargetClusters(
            state.targetReplicas, state.availableClusters, None, state.spec.UID
        ),
    )


def dynamicScaleDown(state: assignState) -> list[TargetCluster]:
    state.targetReplicas = state.spec.Replicas

    def calculator(_: list[ClusterDetailInfo], __: Spec) -> list[TargetCluster]:
        availableClusters = [replace(c) for c in state.scheduledClusters]
        sort_sort(availableClusters, target_clusters_list_less)
        return availableClusters

    state.buildAvailableClusters(calculator)
    state.scheduledClusters = []
    return dynamicDivideReplicas(state)


def dynamicScaleUp(state: assignState) -> list[TargetCluster]:
    state.targetReplicas = state.spec.Replicas - state.assignedReplicas

    def calculator(clusters: list[ClusterDetailInfo], _: Spec) -> list[TargetCluster]:
        clusterAvailableReplicas = [TargetCluster(c.Name, c.AllocatableReplicas) for c in clusters]
        sort_sort(clusterAvailableReplicas, target_clusters_list_less)
        return clusterAvailableReplicas

    state.buildAvailableClusters(calculator)
    return dynamicDivideReplicas(state)


def dynamicFreshScale(state: assignState) -> list[TargetCluster]:
    state.targetReplicas = state.spec.Replicas

    def calculator(clusters: list[ClusterDetailInfo], _: Spec) -> list[TargetCluster]:
        clusterAvailableReplicas = [TargetCluster(c.Name, c.AllocatableReplicas) for c in clusters]
        for scheduledCluster in state.scheduledClusters:
            for availableCluster in clusterAvailableReplicas:
                if availableCluster.Name != scheduledCluster.Name:
                    continue
                availableCluster.Replicas += scheduledCluster.Replicas
                break
        sort_sort(clusterAvailableReplicas, target_clusters_list_less)
        return clusterAvailableReplicas

    state.buildAvailableClusters(calculator)
    state.scheduledClusters = []
    return dynamicDivideReplicas(state)


def assignByDynamicStrategy(state: assignState) -> list[TargetCluster]:
    state.buildScheduledClusters()
    if state.fresh:  # spec.rescheduleTriggeredAt after status.lastScheduledTime
        return dynamicFreshScale(state)
    if state.assignedReplicas > state.spec.Replicas:
        return dynamicScaleDown(state)
    if state.assignedReplicas < state.spec.Replicas:
        return dynamicScaleUp(state)
    return state.scheduledClusters


def removeZeroReplicasCluster(assignResults: Sequence[TargetCluster]) -> list[TargetCluster]:
    return [TargetCluster(c.Name, c.Replicas) for c in assignResults if c.Replicas > 0]


def assignReplicasToClusters(state: assignState) -> list[TargetCluster]:
    assign = {
        AggregatedStrategy: assignByDynamicStrategy,
        StaticWeightStrategy: assignByStaticWeightStrategy,
        DynamicWeightStrategy: assignByDynamicStrategy,
    }[state.strategyType]
    return removeZeroReplicasCluster(assign(state))


# ---------------------------------------------------------------------------------------
# The entry point the tests call: SelectClusters then AssignReplicas (common.go).


def schedule(
    strategy: str,
    replicas: int,
    estimates: Sequence[tuple[str, int | None]],
    previous: Sequence[tuple[str, int]] = (),
    uid: str = "",
    static_weights: Sequence[StaticClusterWeight] | None = None,
    fresh: bool = False,
) -> dict[str, int]:
    """Karmada's division: cluster -> replicas (clusters with replicas only).

    ``estimates`` lists the candidate clusters with the estimator's answer (None: none);
    ``previous`` is the binding's ``spec.clusters`` in its order. Raises
    :class:`Unschedulable` as Karmada does."""
    spec = Spec(Replicas=replicas, Clusters=[TargetCluster(n, r) for n, r in previous], UID=uid)
    candidates = generateClustersInfo(estimates, spec)
    if not candidates:
        raise Unschedulable("no clusters available to schedule")
    if spec.Replicas == 0:  # AssignReplicas: not a workload, every candidate with no replicas
        return {}
    state = assignState(
        candidates, spec, strategy, list(static_weights) if static_weights is not None else None,
        fresh=fresh,
    )
    return {c.Name: c.Replicas for c in assignReplicasToClusters(state)}
