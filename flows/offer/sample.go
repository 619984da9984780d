package offer

import (
	"math/rand/v2"
	"strconv"
)

// Sample vocabularies of SampleOffers.
var (
	SampleDelivery  = []string{"post", "courier", "pickup"}
	SamplePayment   = []string{"card", "cash", "transfer"}
	SampleLocations = []string{"loc0", "loc1", "loc2", "loc3", "loc4", "loc5", "loc6", "loc7"}
)

// SampleOffers returns n deterministic offers round robin over handlers,
// for the demo, tests and benchmark.
func SampleOffers(seed uint64, n, products int, handlers []HandlerSpec) []Offer {
	rng := rand.New(rand.NewPCG(seed, 0x0ff3))
	pick := func(from []string, k int) []string {
		out := make([]string, 0, k)
		for _, i := range rng.Perm(len(from))[:k] {
			out = append(out, from[i])
		}
		return out
	}
	out := make([]Offer, n)
	for i := range out {
		o := Offer{ID: "o" + strconv.Itoa(i), Handler: handlers[i%len(handlers)].Tag,
			ProductID: "p" + strconv.Itoa(rng.IntN(max(1, products))), SellerID: "s" + strconv.Itoa(rng.IntN(50)),
			Quantity: int64(rng.IntN(100)), Locations: pick(SampleLocations, 1+rng.IntN(4))}
		for j := range 1 + rng.IntN(3) {
			o.Plans = append(o.Plans, PricePlan{ID: "plan" + strconv.Itoa(j), MinQuantity: int64(1 + j*rng.IntN(10)), UnitPrice: int64(100 + rng.IntN(10000))})
		}
		for _, id := range pick(SampleDelivery, 1+rng.IntN(3)) {
			o.Delivery = append(o.Delivery, Method{ID: id, Cost: int64(rng.IntN(1000))})
		}
		for _, id := range pick(SamplePayment, 1+rng.IntN(3)) {
			o.Payment = append(o.Payment, Method{ID: id, Cost: int64(rng.IntN(300))})
		}
		out[i] = o
	}
	return out
}
