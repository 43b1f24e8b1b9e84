package themis

// CheckOrdersMutated is CheckOrders with the checker's mutations, for
// the power tests.
func CheckOrdersMutated(t Topology, scheds []ChunkSchedule, orders [][][]OpRef, m Mutations) error {
	return checkOrders(t, scheds, orders, m)
}
