// A fixture of one rank's memory layer over a space of the test's own: a bootstrap of one
// rank (through a root on 127.0.0.1), a topology where the rank reaches itself, the heap and
// the registrations. Unit tests of the memory layer derive from it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "memory/heap.h"
#include "memory/registration.h"

namespace symcomm {

template <typename TestSpace>
class OneRankMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1", 1);
    UniqueId uid;
    uid.token = random_token();
    uid.root = start_bootstrap_root(tcp_listen(NetAddr::parse("127.0.0.1", 0), 16), uid.token);
    bootstrap_ = Bootstrap::join(uid, 1, 0);
    topology_.node_of = {0};
    topology_.local_ranks = {0};
    topology_.accessible = {1};
    topology_.gpu_owner = {0};
    heap_ = std::make_unique<Heap>(*bootstrap_, topology_, space_);
    registrations_ = std::make_unique<Registrations>(*bootstrap_, topology_, space_, *heap_);
  }
  void TearDown() override {
    registrations_.reset();
    heap_.reset();
    bootstrap_->begin_finalize();
    bootstrap_->barrier();
    bootstrap_.reset();
  }

  std::unique_ptr<Bootstrap> bootstrap_;
  Topology topology_;
  TestSpace space_;
  std::unique_ptr<Heap> heap_;
  std::unique_ptr<Registrations> registrations_;
};

}  // namespace symcomm
