//! Patch carried by Portcullis: Go's `sort.Slice` (pattern-defeating
//! quicksort, `sort/zsortfunc.go` of Go 1.22 and later), ported step for
//! step, so that `sortBy` leaves elements with equal keys in the order
//! cel-go leaves them: Go's sort is not stable beyond 12 elements, and its
//! order of equal keys is a fact of its algorithm. `less` need not be a
//! total order (NaN keys): like Go's, the port then still ends, in an
//! order of its own, and never indexes out of bounds.

/// The indexes `0..n` in the order Go's `sort.Slice` puts them, `less(a,
/// b)` comparing the elements that started at `a` and `b`.
pub(crate) fn sort_slice(n: usize, less: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut sorter = Sorter { order: (0..n).collect(), less };
    let n = n as isize;
    // Go's `bits.Len(uint(length))`.
    let limit = (usize::BITS - (n as usize).leading_zeros()) as isize;
    sorter.pdqsort(0, n, limit);
    sorter.order
}

const MAX_INSERTION: isize = 12;

#[derive(PartialEq, Eq)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

/// Go's `lessSwap` over the permutation being sorted.
struct Sorter<F> {
    order: Vec<usize>,
    less: F,
}

impl<F: Fn(usize, usize) -> bool> Sorter<F> {
    fn less(&self, i: isize, j: isize) -> bool {
        (self.less)(self.order[i as usize], self.order[j as usize])
    }

    fn swap(&mut self, i: isize, j: isize) {
        self.order.swap(i as usize, j as usize);
    }

    fn insertion_sort(&mut self, a: isize, b: isize) {
        for i in a + 1..b {
            let mut j = i;
            while j > a && self.less(j, j - 1) {
                self.swap(j, j - 1);
                j -= 1;
            }
        }
    }

    fn sift_down(&mut self, lo: isize, hi: isize, first: isize) {
        let mut root = lo;
        loop {
            let mut child = 2 * root + 1;
            if child >= hi {
                return;
            }
            if child + 1 < hi && self.less(first + child, first + child + 1) {
                child += 1;
            }
            if !self.less(first + root, first + child) {
                return;
            }
            self.swap(first + root, first + child);
            root = child;
        }
    }

    fn heap_sort(&mut self, a: isize, b: isize) {
        let (first, lo, hi) = (a, 0, b - a);
        let mut i = (hi - 1) / 2;
        while i >= 0 {
            self.sift_down(i, hi, first);
            i -= 1;
        }
        let mut i = hi - 1;
        while i >= 0 {
            self.swap(first, first + i);
            self.sift_down(lo, i, first);
            i -= 1;
        }
    }

    fn pdqsort(&mut self, mut a: isize, mut b: isize, mut limit: isize) {
        let (mut was_balanced, mut was_partitioned) = (true, true);
        loop {
            let length = b - a;
            if length <= MAX_INSERTION {
                self.insertion_sort(a, b);
                return;
            }
            if limit == 0 {
                self.heap_sort(a, b);
                return;
            }
            if !was_balanced {
                self.break_patterns(a, b);
                limit -= 1;
            }
            let (mut pivot, mut hint) = self.choose_pivot(a, b);
            if hint == Hint::Decreasing {
                self.reverse_range(a, b);
                pivot = (b - 1) - (pivot - a);
                hint = Hint::Increasing;
            }
            if was_balanced && was_partitioned && hint == Hint::Increasing && self.partial_insertion_sort(a, b) {
                return;
            }
            if a > 0 && !self.less(a - 1, pivot) {
                a = self.partition_equal(a, b, pivot);
                continue;
            }
            let (mid, already_partitioned) = self.partition(a, b, pivot);
            was_partitioned = already_partitioned;
            let (left, right) = (mid - a, b - mid);
            let balance_threshold = length / 8;
            if left < right {
                was_balanced = left >= balance_threshold;
                self.pdqsort(a, mid, limit);
                a = mid + 1;
            } else {
                was_balanced = right >= balance_threshold;
                self.pdqsort(mid + 1, b, limit);
                b = mid;
            }
        }
    }

    fn partition(&mut self, a: isize, b: isize, pivot: isize) -> (isize, bool) {
        self.swap(a, pivot);
        let (mut i, mut j) = (a + 1, b - 1);
        while i <= j && self.less(i, a) {
            i += 1;
        }
        while i <= j && !self.less(j, a) {
            j -= 1;
        }
        if i > j {
            self.swap(j, a);
            return (j, true);
        }
        self.swap(i, j);
        i += 1;
        j -= 1;
        loop {
            while i <= j && self.less(i, a) {
                i += 1;
            }
            while i <= j && !self.less(j, a) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
        self.swap(j, a);
        (j, false)
    }

    fn partition_equal(&mut self, a: isize, b: isize, pivot: isize) -> isize {
        self.swap(a, pivot);
        let (mut i, mut j) = (a + 1, b - 1);
        loop {
            while i <= j && !self.less(a, i) {
                i += 1;
            }
            while i <= j && self.less(a, j) {
                j -= 1;
            }
            if i > j {
                return i;
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }

    fn partial_insertion_sort(&mut self, a: isize, b: isize) -> bool {
        const MAX_STEPS: usize = 5;
        const SHORTEST_SHIFTING: isize = 50;
        let mut i = a + 1;
        for _ in 0..MAX_STEPS {
            while i < b && !self.less(i, i - 1) {
                i += 1;
            }
            if i == b {
                return true;
            }
            if b - a < SHORTEST_SHIFTING {
                return false;
            }
            self.swap(i, i - 1);
            if i - a >= 2 {
                // Go's bound is 1, not `a + 1`: kept as it is.
                let mut j = i - 1;
                while j >= 1 {
                    if !self.less(j, j - 1) {
                        break;
                    }
                    self.swap(j, j - 1);
                    j -= 1;
                }
            }
            if b - i >= 2 {
                let mut j = i + 1;
                while j < b {
                    if !self.less(j, j - 1) {
                        break;
                    }
                    self.swap(j, j - 1);
                    j += 1;
                }
            }
        }
        false
    }

    fn break_patterns(&mut self, a: isize, b: isize) {
        let length = b - a;
        if length >= 8 {
            let mut random = length as u64;
            // Go's `nextPowerOfTwo`: 1 << bits.Len(length).
            let modulus = 1u64 << (u64::BITS - (length as u64).leading_zeros());
            let mut idx = a + (length / 4) * 2 - 1;
            while idx <= a + (length / 4) * 2 + 1 {
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                let mut other = (random & (modulus - 1)) as isize;
                if other >= length {
                    other -= length;
                }
                self.swap(idx, a + other);
                idx += 1;
            }
        }
    }

    fn choose_pivot(&mut self, a: isize, b: isize) -> (isize, Hint) {
        const SHORTEST_NINTHER: isize = 50;
        const MAX_SWAPS: usize = 4 * 3;
        let l = b - a;
        let mut swaps = 0;
        let (mut i, mut j, mut k) = (a + l / 4, a + l / 4 * 2, a + l / 4 * 3);
        if l >= 8 {
            if l >= SHORTEST_NINTHER {
                i = self.median_adjacent(i, &mut swaps);
                j = self.median_adjacent(j, &mut swaps);
                k = self.median_adjacent(k, &mut swaps);
            }
            j = self.median(i, j, k, &mut swaps);
        }
        match swaps {
            0 => (j, Hint::Increasing),
            MAX_SWAPS => (j, Hint::Decreasing),
            _ => (j, Hint::Unknown),
        }
    }

    fn order2(&self, a: isize, b: isize, swaps: &mut usize) -> (isize, isize) {
        if self.less(b, a) {
            *swaps += 1;
            return (b, a);
        }
        (a, b)
    }

    fn median(&self, a: isize, b: isize, c: isize, swaps: &mut usize) -> isize {
        let (a, b) = self.order2(a, b, swaps);
        let (b, _) = self.order2(b, c, swaps);
        let (_, b) = self.order2(a, b, swaps);
        b
    }

    fn median_adjacent(&self, a: isize, swaps: &mut usize) -> isize {
        self.median(a - 1, a, a + 1, swaps)
    }

    fn reverse_range(&mut self, a: isize, b: isize) {
        let (mut i, mut j) = (a, b - 1);
        while i < j {
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }
}
