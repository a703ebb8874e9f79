//! The budget's rules, unit by unit: the queue, the head's reserve, the floor, the wake-ups.

use super::*;
use std::sync::atomic::AtomicBool;
use std::task::Wake;

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}
fn flag() -> (Arc<Flag>, Waker) {
    let f = Arc::new(Flag(AtomicBool::new(false)));
    (f.clone(), Waker::from(f))
}

#[test]
fn charges_fit_under_the_limit_and_what_does_not_fit_waits() {
    let b = Budget::new(100);
    let mut one = Charge::new(Some(&b));
    let mut two = Charge::new(Some(&b));
    assert_eq!(one.settle(60), Ok(()));
    assert_eq!(two.settle(41), Err(Short::Wait));
    assert_eq!(
        (b.held(), b.waiting(), b.waited(), b.refused()),
        (60, 1, 1, 0)
    );
    let (woken, waker) = flag();
    assert!(!two.poll_wait(Some(&waker)));
    // Memory back: the head is woken and its charge goes through.
    assert_eq!(one.settle(50), Ok(()));
    assert!(woken.0.load(Ordering::SeqCst));
    assert!(two.poll_wait(None));
    assert_eq!(two.settle(41), Ok(()));
    assert_eq!((b.held(), b.waiting(), b.peak()), (91, 0, 91));
    drop((one, two));
    assert_eq!(b.held(), 0);
}

#[test]
fn the_heads_need_is_kept_for_it_and_the_others_take_what_leaves_it() {
    let b = Budget::new(100);
    let mut holder = Charge::new(Some(&b));
    let mut big = Charge::new(Some(&b));
    let mut small = Charge::new(Some(&b));
    let mut late = Charge::new(Some(&b));
    assert_eq!(holder.settle(90), Ok(()));
    assert_eq!(big.settle(50), Err(Short::Wait));
    // Ten bytes are free, but the head waits for fifty: no one takes them from it.
    assert_eq!(small.settle(5), Err(Short::Wait));
    assert_eq!(holder.settle(40), Ok(()));
    // Sixty free: five of them leave the head its fifty, even before it tries again.
    assert_eq!(small.settle(5), Ok(()));
    assert_eq!(late.settle(10), Err(Short::Wait));
    assert_eq!(big.settle(50), Ok(()));
    assert_eq!(late.settle(10), Err(Short::Wait));
    assert_eq!((b.held(), b.waiting()), (95, 1));
    drop(holder);
    assert_eq!(late.settle(10), Ok(()));
    assert_eq!((b.held(), b.waiting()), (65, 0));
}

#[test]
fn when_waiters_hold_everything_the_head_goes_past_the_limit_alone() {
    let b = Budget::new(100);
    let mut cs: Vec<Charge> = (0..4).map(|_| Charge::new(Some(&b))).collect();
    for c in &mut cs {
        assert_eq!(c.settle(25), Ok(()));
    }
    // Each needs 40; all wait, all the budget is theirs.
    for c in &mut cs[1..] {
        assert_eq!(c.settle(40), Err(Short::Wait));
    }
    // The last one to wait makes every charge a waiter's: the head (the second) may go.
    assert_eq!(cs[0].settle(40), Err(Short::Wait));
    assert_eq!(cs[1].settle(40), Ok(()));
    assert_eq!(b.held(), 115);
    // The floor grows on; the others still wait.
    assert_eq!(cs[1].settle(60), Ok(()));
    assert_eq!(cs[2].settle(40), Err(Short::Wait));
    // Its message done, it gives back everything: the next head goes within the limit.
    assert_eq!(cs[1].settle(0), Ok(()));
    assert_eq!(cs[2].settle(40), Ok(()));
    assert_eq!(cs[3].settle(40), Err(Short::Wait));
    assert!(b.peak() <= 100 + 60);
    drop(cs);
    assert_eq!((b.held(), b.waiting()), (0, 0));
}

#[test]
fn a_charge_past_the_whole_limit_is_refused_at_once() {
    let b = Budget::new(100);
    let mut c = Charge::new(Some(&b));
    assert_eq!(c.settle(30), Ok(()));
    assert_eq!(c.settle(101), Err(Short::Never));
    assert_eq!(
        (c.bytes(), b.held(), b.refused(), b.waiting()),
        (30, 30, 1, 0)
    );
    assert_eq!(c.grow_up_to(500), Ok(70));
    assert_eq!(c.grow_up_to(1), Err(Short::Never));
}

#[test]
fn a_waiter_that_goes_away_leaves_the_queue_and_wakes_the_next() {
    let b = Budget::new(100);
    let mut holder = Charge::new(Some(&b));
    let mut first = Charge::new(Some(&b));
    let mut second = Charge::new(Some(&b));
    assert_eq!(holder.settle(100), Ok(()));
    assert_eq!(first.settle(10), Err(Short::Wait));
    assert_eq!(second.settle(10), Err(Short::Wait));
    let (woken, waker) = flag();
    assert!(!second.poll_wait(Some(&waker)));
    drop(first);
    assert!(woken.0.load(Ordering::SeqCst));
    assert_eq!(b.waiting(), 1);
    drop(holder);
    assert_eq!(second.settle(10), Ok(()));
    assert_eq!((b.held(), b.waiting()), (10, 0));
}

#[test]
fn without_a_budget_nothing_is_charged_or_refused() {
    let mut c = Charge::new(None);
    assert_eq!(c.settle(usize::MAX), Ok(()));
    assert_eq!(c.grow_up_to(7), Ok(7));
    assert_eq!(c.bytes(), 0);
}

#[test]
fn the_shared_budget_is_one_for_the_process() {
    assert!(Budget::shared().same_as(&Budget::shared()));
    assert_eq!(Budget::shared().limit(), DEFAULT_BUDGET);
    assert!(!Budget::new(1).same_as(&Budget::new(1)));
}
